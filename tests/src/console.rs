//! The operator console over plain HTTP: a signed-in session (its cookie kept by hand, as a
//! browser would), pages as text, and forms posted with the session's CSRF token.

use reqwest::header::{CONTENT_TYPE, COOKIE, HeaderMap, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;

const FORM: &str = "application/x-www-form-urlencoded";

fn encode(form: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(form).expect("a form encodes")
}

/// A page or a form's answer.
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    /// Where a redirect points.
    pub fn location(&self) -> Option<&str> {
        self.headers.get(LOCATION).and_then(|v| v.to_str().ok())
    }

    /// The CSRF token of the page's forms.
    pub fn csrf(&self) -> Option<String> {
        let at = self.body.find("name=\"csrf\" value=\"")? + "name=\"csrf\" value=\"".len();
        let end = self.body[at..].find('"')?;
        Some(self.body[at..at + end].to_owned())
    }
}

/// A browser-like client of one console: it follows no redirects and holds one cookie.
pub struct Console {
    base: String,
    client: reqwest::Client,
    cookie: Option<String>,
}

impl Console {
    /// A client of the console served at `base` (`http://host:port`).
    pub fn new(base: &str) -> Console {
        crate::functions::install_tls();
        Console {
            base: base.to_owned(),
            client: reqwest::Client::builder()
                .redirect(Policy::none())
                .build()
                .expect("an HTTP client"),
            cookie: None,
        }
    }

    /// Signs in with `key` and keeps the session cookie; the sign-in answer.
    pub async fn sign_in(&mut self, key: &str) -> Page {
        let page = self
            .send(
                self.client
                    .post(format!("{}/console/sign-in", self.base))
                    .header(CONTENT_TYPE, FORM)
                    .body(encode(&[("key", key), ("next", "/console/")])),
            )
            .await;
        if let Some(cookie) = page.headers.get(SET_COOKIE).and_then(|v| v.to_str().ok()) {
            self.cookie = cookie.split(';').next().map(str::to_owned);
        }
        page
    }

    /// `GET` a console path (`/console/...`).
    pub async fn get(&self, path: &str) -> Page {
        self.send(self.client.get(format!("{}{path}", self.base)))
            .await
    }

    /// `POST` a form to a console path.
    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Page {
        self.post_with(path, form, HeaderMap::new()).await
    }

    /// `POST` with extra headers (an `Origin`, say).
    pub async fn post_with(&self, path: &str, form: &[(&str, &str)], headers: HeaderMap) -> Page {
        self.send(
            self.client
                .post(format!("{}{path}", self.base))
                .headers(headers)
                .header(CONTENT_TYPE, FORM)
                .body(encode(form)),
        )
        .await
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Page {
        let request = match &self.cookie {
            Some(cookie) => request.header(COOKIE, cookie),
            None => request,
        };
        let response = request.send().await.expect("the console answers");
        Page {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.text().await.expect("a body"),
        }
    }
}
