//! A real headless Chromium driven over WebDriver: Debian's `chromium` and
//! `chromium-driver` (`.ci/run` installs them), nothing downloaded at run time.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Map, Value, json};

use crate::processes::free_port;

/// The ChromeDriver binary: `CHROMEDRIVER` or Debian's.
fn chromedriver() -> PathBuf {
    std::env::var_os("CHROMEDRIVER")
        .map_or_else(|| PathBuf::from("/usr/bin/chromedriver"), PathBuf::from)
}

/// A browser session; the driver (and its Chromium) stop when it is dropped.
pub struct Browser {
    /// The WebDriver client.
    pub client: Client,
    driver: Child,
    profile: PathBuf,
}

impl Browser {
    /// A headless Chromium `width` pixels wide, with a fresh profile.
    pub async fn start(width: u32, height: u32) -> Browser {
        if let Err(message) = res_setup::require(
            &[res_setup::Tool::Chromium, res_setup::Tool::ChromeDriver],
            "the console's browser tests",
        ) {
            panic!("{message}");
        }
        let port = free_port();
        let driver = Command::new(chromedriver())
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group, so dropping the browser ends Chromium too.
            .process_group(0)
            .spawn()
            .expect("chromedriver runs");
        let profile =
            std::env::temp_dir().join(format!("res-chromium-{port}-{}", std::process::id()));
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--hide-scrollbars".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.display()),
        ];
        let mut capabilities = Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"args": args, "binary": chromium()}),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(client) => break client,
                Err(error) if Instant::now() < deadline => {
                    let _ = error;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => panic!("cannot start a headless Chromium: {error}"),
            }
        };
        Browser {
            client,
            driver,
            profile,
        }
    }

    /// Opens `url` and waits for its `<main>`.
    pub async fn open(&self, url: &str) {
        self.client.goto(url).await.expect("the page opens");
        self.wait_for("main").await;
    }

    /// Waits (up to 20 s) for an element matching `css`.
    pub async fn wait_for(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|error| panic!("no {css} on the page: {error}"))
    }

    /// The visible text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        self.wait_for(css)
            .await
            .text()
            .await
            .unwrap_or_else(|error| panic!("text of {css}: {error}"))
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> usize {
        self.client
            .find_all(Locator::Css(css))
            .await
            .map(|all| all.len())
            .unwrap_or(0)
    }

    /// Types `text` into the field matching `css` (after clearing it).
    pub async fn fill(&self, css: &str, text: &str) {
        let field = self.wait_for(css).await;
        field.clear().await.expect("the field clears");
        field.send_keys(text).await.expect("the field takes keys");
    }

    /// Clicks the link or submit button matching `css` and waits for the next page: until
    /// the current page's document is gone (its `<main>` alone is no sign, the old page has
    /// one too), then for the new page's `<main>`.
    pub async fn click(&self, css: &str) {
        let old_page = self
            .client
            .find(Locator::Css("html"))
            .await
            .expect("a page is open");
        self.wait_for(css)
            .await
            .click()
            .await
            .unwrap_or_else(|error| panic!("click {css}: {error}"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while old_page.tag_name().await.is_ok() {
            assert!(
                Instant::now() < deadline,
                "clicking {css} did not lead to another page"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.wait_for("main").await;
    }

    /// Waits (up to `timeout`) until the text of `css` satisfies `accept`; that text.
    pub async fn wait_for_text(
        &self,
        css: &str,
        timeout: Duration,
        accept: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if accept(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "{css} never read as expected; last: {text:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The current path and query.
    pub async fn path(&self) -> String {
        let url = self.client.current_url().await.expect("a URL");
        match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        }
    }

    /// Runs a script in the page (WebDriver's, not the page's: the CSP does not apply).
    pub async fn script(&self, source: &str) -> Value {
        self.client
            .execute(source, Vec::new())
            .await
            .expect("the script runs")
    }

    /// Saves a PNG of the whole page as it is now.
    pub async fn screenshot(&self, path: &Path) {
        let png = self.client.screenshot().await.expect("a screenshot");
        std::fs::write(path, png).expect("the screenshot is written");
    }

    /// Resizes the window.
    pub async fn resize(&self, width: u32, height: u32) {
        self.client
            .set_window_size(width, height)
            .await
            .expect("the window resizes");
    }
}

fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned())
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.driver.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
