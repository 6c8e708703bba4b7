//! The operator console over real HTTP and PostgreSQL: sign-in and its cookie, the headers
//! every page carries, escaping, the walls between brands, CSRF, and actions that go
//! through the operator functions (refusals in their words, nothing done before a refusal).
//! The same console in a real browser: tests/tests/e2e/console.rs.

use chrono::TimeDelta;
use reqwest::header::{HeaderMap, HeaderValue, ORIGIN};
use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_shared::wire::Call;
use res_shared::wire::{HeartbeatRequest, RegisterRequest, SetNextRunTimeRequest};
use res_tests::console::Console;
use res_tests::functions::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

const SCRIPT_NAME: &str = "<script>alert(1)</script>";

struct Brands {
    app: TestApp,
    /// Brand A's rule named like a script, needing attention.
    flagged: Uuid,
    /// Brand A's plain rule.
    plain: Uuid,
    /// Brand B's rule.
    other: Uuid,
    /// Brand B's execution.
    other_run: Uuid,
    operator_a: String,
    viewer_a: String,
}

async fn brands() -> Brands {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let due = Some(app.db_now().await + TimeDelta::hours(1));
    let spec = || RuleSpec {
        next_run_time: due,
        ..RuleSpec::default()
    };
    let brand_a = seed.brand("Asia/Riyadh").await;
    let branch_a = seed.branch(brand_a, None).await;
    let flagged = seed.branch_rule(branch_a, spec()).await;
    let plain = seed.branch_rule(branch_a, spec()).await;
    let brand_b = seed.brand("Europe/Berlin").await;
    let branch_b = seed.branch(brand_b, None).await;
    // Due, so brand B's runner claims it.
    let other = seed.branch_rule(branch_b, RuleSpec::default()).await;
    seed.name_rule(flagged, SCRIPT_NAME).await;
    app.exec(
        "UPDATE branch_rules SET needs_attention_at = now(), consecutive_failures = 3, \
             needs_attention_reason = 'failed 3 times in a row: camera offline' WHERE id = $1",
        &[flagged],
    )
    .await;
    let site_b = app.runner_token(&[branch_b]).await;
    let other_run = app.claim(&site_b, other, "berlin-1").await.execution;
    let registered = app
        .call(
            RegisterRequest::NAME,
            &site_b,
            serde_json::json!({"runner_id": "berlin-1", "boot_id": "boot-b"}),
        )
        .await;
    assert_eq!(registered.status, 200, "{}", registered.body);
    // Brand A's site runs a release these functions no longer serve.
    let site_a = app.runner_token(&[branch_a]).await;
    let registered = app
        .call(
            RegisterRequest::NAME,
            &site_a,
            serde_json::json!({"runner_id": "riyadh-1", "boot_id": "boot-a", "version": "0.0.9"}),
        )
        .await;
    assert_eq!(registered.status, 200, "{}", registered.body);
    let scope = KeyScope {
        brand_ids: vec![brand_a],
        ..KeyScope::default()
    };
    let operator_a = app.token("A admin", Role::Operator, &scope).await;
    let viewer_a = app.token("A viewer", Role::Viewer, &scope).await;
    Brands {
        app,
        flagged,
        plain,
        other,
        other_run,
        operator_a,
        viewer_a,
    }
}

async fn signed_in(app: &TestApp, key: &str) -> Console {
    let mut console = Console::new(&app.base);
    let page = console.sign_in(key).await;
    assert_eq!(page.status, 303, "{}", page.body);
    console
}

#[tokio::test]
async fn signing_in_sets_a_strict_http_only_cookie_and_never_echoes_the_key() {
    let b = brands().await;
    let mut console = Console::new(&b.app.base);
    let page = console.get("/console/").await;
    assert_eq!(page.status, 303);
    assert_eq!(page.location(), Some("/console/sign-in?next=%2Fconsole%2F"));

    let page = console.sign_in(&b.operator_a).await;
    assert_eq!(page.status, 303, "{}", page.body);
    assert_eq!(page.location(), Some("/console/"));
    let cookie = page.headers["set-cookie"].to_str().unwrap_or_default();
    for part in [
        "res_console=",
        "HttpOnly",
        "SameSite=Strict",
        "Path=/console",
    ] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(!cookie.contains(&b.operator_a), "the cookie is not the key");
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let fleet = console.get("/console/").await;
    assert_eq!(fleet.status, 200, "{}", fleet.body);
    assert!(!fleet.body.contains(&b.operator_a));
    assert!(fleet.body.contains("A admin"));

    // Behind HTTPS the cookie is Secure and pinned to the host.
    let mut headers = HeaderMap::new();
    headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
    let page = Console::new(&b.app.base)
        .post_with(
            "/console/sign-in",
            &[("key", b.operator_a.as_str())],
            headers,
        )
        .await;
    let cookie = page.headers["set-cookie"].to_str().unwrap_or_default();
    assert!(cookie.starts_with("__Host-res_console="), "{cookie}");
    assert!(
        cookie.contains("; Secure") && cookie.contains("Path=/;"),
        "{cookie}"
    );

    // Refusals name the field and sign nobody in.
    let runner = b.app.runner_token(&[]).await;
    for (key, status) in [
        ("", 422),
        ("res_nonsense", 401),
        (runner.as_str(), 403),
        (b.app.service.as_str(), 403),
    ] {
        let page = Console::new(&b.app.base).sign_in(key).await;
        assert_eq!(page.status, status, "{key}: {}", page.body);
        assert!(page.body.contains("key: "), "{}", page.body);
        assert!(page.headers.get("set-cookie").is_none());
        if !key.is_empty() {
            assert!(!page.body.contains(key), "the key is not shown back");
        }
    }
}

#[tokio::test]
async fn every_page_forbids_framing_and_foreign_scripts() {
    let b = brands().await;
    let console = signed_in(&b.app, &b.viewer_a).await;
    let rule = format!("/console/rules/{}", b.plain);
    for path in [
        "/console/sign-in",
        "/console/",
        "/console/rules",
        rule.as_str(),
        "/console/executions",
        "/console/runners",
        "/console/nowhere",
    ] {
        let page = console.get(path).await;
        let csp = page.headers["content-security-policy"]
            .to_str()
            .unwrap_or_default();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
            "{path}: {csp}"
        );
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{path}: {csp}"
        );
        assert_eq!(page.headers["x-frame-options"], "DENY", "{path}");
        assert_eq!(page.headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(page.headers["cache-control"], "no-store", "{path}");
    }
    let script = console.get("/console/assets/console.js").await;
    assert_eq!(script.status, 200);
    assert!(
        script.headers["content-type"]
            .to_str()
            .unwrap_or_default()
            .starts_with("text/javascript")
    );
}

#[tokio::test]
async fn the_fleet_shows_what_needs_attention_with_its_reason_and_names_as_text() {
    let b = brands().await;
    let console = signed_in(&b.app, &b.operator_a).await;
    let fleet = console.get("/console/").await;
    assert_eq!(fleet.status, 200, "{}", fleet.body);
    assert!(
        fleet
            .body
            .contains("failed 3 times in a row: camera offline"),
        "{}",
        fleet.body
    );
    assert!(
        fleet
            .body
            .contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
        "{}",
        fleet.body
    );
    assert!(
        !fleet.body.contains(SCRIPT_NAME),
        "the name is never markup"
    );
    // The runners by version, and the one outside the served range with its reason; brand
    // B's runner (no version: unsupported too) is not A's to see.
    assert!(
        fleet
            .body
            .contains("<dd id=\"totals-versions\">1 on 0.0.9</dd>"),
        "{}",
        fleet.body
    );
    assert!(
        fleet.body.contains(
            "<td>riyadh-1</td><td>Branch</td><td>runs 0.0.9, older than 0.1.0, the oldest \
             runner these functions serve; upgrade it</td>"
        ),
        "{}",
        fleet.body
    );
    assert!(!fleet.body.contains("berlin-1"), "{}", fleet.body);
    let rule = console.get(&format!("/console/rules/{}", b.flagged)).await;
    assert_eq!(rule.status, 200, "{}", rule.body);
    assert!(!rule.body.contains(SCRIPT_NAME));
    assert!(rule.body.contains("needs attention"), "{}", rule.body);
    assert!(rule.body.contains("Asia/Riyadh"), "times name their zone");
}

#[tokio::test]
async fn another_brands_rules_and_executions_answer_as_unknown_ones() {
    let b = brands().await;
    let console = signed_in(&b.app, &b.operator_a).await;
    let csrf = console.get("/console/").await.csrf().unwrap_or_default();
    let unknown = Uuid::new_v4();
    for (theirs, made_up) in [
        (
            format!("/console/rules/{}", b.other),
            format!("/console/rules/{unknown}"),
        ),
        (
            format!("/console/executions/{}", b.other_run),
            format!("/console/executions/{unknown}"),
        ),
    ] {
        let (a, z) = (console.get(&theirs).await, console.get(&made_up).await);
        assert_eq!((a.status, z.status), (404, 404), "{theirs}");
        let id_of = |path: &str| path.rsplit('/').next().unwrap_or_default().to_owned();
        assert_eq!(
            a.body.replace(&id_of(&theirs), "ID"),
            z.body.replace(&id_of(&made_up), "ID")
        );
    }
    let form = [("csrf", csrf.as_str()), ("reason", "not mine")];
    let theirs = console
        .post(
            &format!("/console/executions/{}/cancel", b.other_run),
            &form,
        )
        .await;
    let made_up = console
        .post(&format!("/console/executions/{unknown}/cancel"), &form)
        .await;
    assert_eq!((theirs.status, made_up.status), (404, 404));
    assert_eq!(
        theirs.body.replace(&b.other_run.to_string(), "ID"),
        made_up.body.replace(&unknown.to_string(), "ID")
    );
    let cancel_asked: bool = sqlx::query_scalar(
        "SELECT cancel_requested OR status = 'cancelled' FROM executions WHERE id = $1",
    )
    .bind(b.other_run)
    .fetch_one(&b.app.pool)
    .await
    .expect("brand B's execution");
    assert!(!cancel_asked, "brand B's run was not touched");
    // Brand B's runner is registered, and never shown to brand A.
    let registered: i64 =
        sqlx::query_scalar("SELECT count(*) FROM runners WHERE runner_id = 'berlin-1'")
            .fetch_one(&b.app.pool)
            .await
            .expect("the registry");
    assert_eq!(registered, 1);
    for page in ["/console/runners", "/console/"] {
        let body = console.get(page).await.body;
        assert!(!body.contains("berlin-1"), "{page}: {body}");
    }
    let theirs = console
        .post(&format!("/console/rules/{}/pause", b.other), &form)
        .await;
    let made_up = console
        .post(&format!("/console/rules/{unknown}/pause"), &form)
        .await;
    assert_eq!((theirs.status, made_up.status), (404, 404));
    let paused: bool =
        sqlx::query_scalar("SELECT paused_at IS NOT NULL FROM branch_rules WHERE id = $1")
            .bind(b.other)
            .fetch_one(&b.app.pool)
            .await
            .expect("brand B's rule");
    assert!(!paused, "nothing happened to brand B");
    let listed = console.get("/console/rules").await;
    assert!(!listed.body.contains(&b.other.to_string()));
    let history = console.get("/console/executions").await;
    assert!(!history.body.contains(&b.other_run.to_string()));
    // The branch filter offers the brand's own branches, never another brand's.
    let branch_of = |rule: Uuid| {
        sqlx::query_scalar::<_, Uuid>("SELECT branch_id FROM branch_rules WHERE id = $1")
            .bind(rule)
            .fetch_one(&b.app.pool)
    };
    let mine = branch_of(b.plain).await.expect("brand A's branch");
    let theirs = branch_of(b.other).await.expect("brand B's branch");
    assert!(
        history.body.contains(&format!("<option value=\"{mine}\"")),
        "{}",
        history.body
    );
    assert!(!history.body.contains(&theirs.to_string()));
}

#[tokio::test]
async fn actions_go_through_the_operator_functions_and_refusals_keep_the_reason() {
    let b = brands().await;
    let console = signed_in(&b.app, &b.operator_a).await;
    let path = format!("/console/rules/{}", b.plain);
    let csrf = console.get(&path).await.csrf().unwrap_or_default();

    let done = console
        .post(
            &format!("{path}/run-now"),
            &[("csrf", &csrf), ("reason", "checking the camera")],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(
        done.location(),
        Some(format!("{path}?done=run-now").as_str())
    );
    let by: Option<String> =
        sqlx::query_scalar("SELECT run_requested_by FROM branch_rules WHERE id = $1")
            .bind(b.plain)
            .fetch_one(&b.app.pool)
            .await
            .expect("the rule");
    assert_eq!(by.as_deref(), Some("A admin"));
    let shown = console.get(&format!("{path}?done=run-now")).await;
    assert!(shown.body.contains("Run requested"), "{}", shown.body);

    // Resuming a rule nobody paused: the function's 409 and words, the reason kept.
    let refused = console
        .post(
            &format!("{path}/resume"),
            &[("csrf", &csrf), ("reason", "back to normal")],
        )
        .await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(
        refused.body.contains("Resume refused: "),
        "{}",
        refused.body
    );
    assert!(
        refused.body.contains("value=\"back to normal\""),
        "{}",
        refused.body
    );
    // An empty reason: refused naming the field.
    let empty = console
        .post(
            &format!("{path}/pause"),
            &[("csrf", &csrf), ("reason", " ")],
        )
        .await;
    assert_eq!(empty.status, 422, "{}", empty.body);
    assert!(empty.body.contains("reason"), "{}", empty.body);
}

#[tokio::test]
async fn viewers_see_no_actions_and_forged_posts_change_nothing() {
    let b = brands().await;
    let viewer = signed_in(&b.app, &b.viewer_a).await;
    let path = format!("/console/rules/{}", b.plain);
    let page = viewer.get(&path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        !page.body.contains("/pause\""),
        "no action forms for viewers"
    );
    let csrf = page.csrf().unwrap_or_default();
    let forged = viewer
        .post(
            &format!("{path}/pause"),
            &[("csrf", &csrf), ("reason", "forged")],
        )
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(
        forged.body.contains("viewer keys can read but not act"),
        "{}",
        forged.body
    );

    let operator = signed_in(&b.app, &b.operator_a).await;
    // Another site's page posting with the operator's cookie, and a token it had to guess.
    let mut foreign = HeaderMap::new();
    foreign.insert(ORIGIN, HeaderValue::from_static("http://evil.example"));
    let good = operator.get(&path).await.csrf().unwrap_or_default();
    let cross = operator
        .post_with(
            &format!("{path}/pause"),
            &[("csrf", &good), ("reason", "x")],
            foreign,
        )
        .await;
    assert_eq!(cross.status, 403, "{}", cross.body);
    let guessed = operator
        .post(
            &format!("{path}/pause"),
            &[("csrf", "0000"), ("reason", "x")],
        )
        .await;
    assert_eq!(guessed.status, 403, "{}", guessed.body);
    let paused: bool =
        sqlx::query_scalar("SELECT paused_at IS NOT NULL FROM branch_rules WHERE id = $1")
            .bind(b.plain)
            .fetch_one(&b.app.pool)
            .await
            .expect("the rule");
    assert!(!paused, "no refused form paused the rule");
}

#[tokio::test]
async fn a_token_from_an_ended_session_is_refused_and_a_revoked_key_ends_its_sessions() {
    let b = brands().await;
    let mut console = signed_in(&b.app, &b.operator_a).await;
    let path = format!("/console/rules/{}", b.plain);
    let stale = console.get(&path).await.csrf().unwrap_or_default();
    let out = console.post("/console/sign-out", &[("csrf", &stale)]).await;
    assert_eq!(out.status, 303, "{}", out.body);
    assert_eq!(console.get(&path).await.status, 303, "signed out");
    console.sign_in(&b.operator_a).await;
    let refused = console
        .post(
            &format!("{path}/pause"),
            &[("csrf", &stale), ("reason", "old form")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("stale"), "{}", refused.body);

    b.app.exec("UPDATE api_keys SET revoked_at = now() WHERE name = 'A admin' AND $1::uuid IS NOT NULL", &[Uuid::nil()]).await;
    assert_eq!(
        console.get(&path).await.status,
        303,
        "revoking the key signs it out"
    );
}

#[tokio::test]
async fn filters_that_cannot_be_read_are_refused_naming_the_field() {
    let b = brands().await;
    let console = signed_in(&b.app, &b.viewer_a).await;
    for (path, field) in [
        ("/console/executions?status=exploded", "status: "),
        ("/console/executions?since=yesterday", "since: "),
        ("/console/executions?after=garbage", "after"),
        ("/console/rules?branch=17", "branch: "),
        ("/console/runners?state=asleep", "state: "),
    ] {
        let page = console.get(path).await;
        assert!(matches!(page.status, 400 | 422), "{path}: {}", page.status);
        assert!(page.body.contains(field), "{path}: {}", page.body);
    }
    let page = console
        .get("/console/executions?status=completed&trigger=manual")
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
}

#[tokio::test]
async fn nul_and_line_breaks_are_refused_by_name_and_a_refused_sign_in_leaves_no_session() {
    use base64::Engine as _;
    let b = brands().await;
    let console = signed_in(&b.app, &b.operator_a).await;
    let path = format!("/console/rules/{}", b.plain);
    let csrf = console.get(&path).await.csrf().unwrap_or_default();
    let before = b.app.fingerprint().await;
    let nul = console
        .post(
            &format!("{path}/pause"),
            &[("csrf", &csrf), ("reason", "camera\0down")],
        )
        .await;
    assert_eq!(nul.status, 422, "{}", nul.body);
    assert!(nul.body.contains("reason must not contain"), "{}", nul.body);
    assert_eq!(b.app.fingerprint().await, before, "nothing was paused");

    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
        serde_json::json!({"list": "rules_list", "filters": "x", "key": ["\0", "\0", Uuid::nil()]})
            .to_string(),
    );
    for page in [
        "/console/rules?name=queue%00".to_owned(),
        format!("/console/rules?after={forged}"),
        format!("/console/runners?after={forged}"),
        format!("/console/executions?after={forged}"),
    ] {
        let answer = console.get(&page).await;
        assert!(
            matches!(answer.status, 400 | 422),
            "{page}: {} {}",
            answer.status,
            answer.body
        );
        assert!(
            answer.body.contains("NUL") || answer.body.contains("after is not a cursor"),
            "{page}: {}",
            answer.body
        );
    }

    let sessions = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM console_sessions")
            .fetch_one(&b.app.pool)
            .await
            .expect("sessions")
    };
    let held = sessions().await;
    for next in ["/console/\r\nSet-Cookie: evil=1", "/console/rules\0"] {
        let answer = Console::new(&b.app.base)
            .post("/console/sign-in", &[("key", &b.viewer_a), ("next", next)])
            .await;
        assert_eq!(answer.status, 303, "{next:?}: {}", answer.body);
        assert_eq!(answer.location(), Some("/console/"), "{next:?}");
    }
    assert_eq!(sessions().await, held + 2, "one session per sign-in");
    let refused = Console::new(&b.app.base)
        .post(
            "/console/sign-in",
            &[("key", "res_unknown"), ("next", "/console/\r\n")],
        )
        .await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert!(refused.headers.get("set-cookie").is_none());
    assert_eq!(sessions().await, held + 2, "a refused sign-in makes none");
}

#[tokio::test]
async fn schedules_read_as_a_sentence_or_one_plain_quote_of_the_cron() {
    let b = brands().await;
    let seed = Seed::new(&b.app.pool);
    let branch: Uuid = sqlx::query_scalar("SELECT branch_id FROM branch_rules WHERE id = $1")
        .bind(b.plain)
        .fetch_one(&b.app.pool)
        .await
        .expect("the branch");
    let console = signed_in(&b.app, &b.viewer_a).await;
    for (cron, words) in [
        ("*/5 * * * * *", "every 5 seconds"),
        (
            "0 9 15 * FRI",
            "on day 15 of the month and on Friday at 09:00",
        ),
        ("0 9 * 1 *", "on the cron schedule \"0 9 * 1 *\""),
    ] {
        let rule = seed
            .branch_rule(
                branch,
                RuleSpec {
                    cron: Some(cron),
                    ..RuleSpec::default()
                },
            )
            .await;
        let page = console.get(&format!("/console/rules/{rule}")).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let shown = page.body.replace("&quot;", "\"").replace("&#34;", "\"");
        assert!(shown.contains(words), "{cron}: {}", page.body);
        assert_eq!(shown.matches(cron).count(), 1, "{cron} once: {}", page.body);
        assert!(!shown.contains('`'), "{}", page.body);
    }
}

#[tokio::test]
async fn sign_ins_are_bounded_per_address_and_foreign_posts_without_origin_are_refused() {
    let b = brands().await;
    for attempt in 1..=10 {
        let page = Console::new(&b.app.base).sign_in("res_guess").await;
        assert_eq!(page.status, 401, "attempt {attempt}: {}", page.body);
    }
    // The eleventh is refused before the key is looked at, even a right one.
    let page = Console::new(&b.app.base).sign_in(&b.operator_a).await;
    assert_eq!(page.status, 429, "{}", page.body);
    assert!(page.headers.get("set-cookie").is_none());
    let retry: u64 = page
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After");
    assert!((1..=900).contains(&retry), "{retry}");
    assert!(
        page.body.contains("too many refused sign-ins"),
        "{}",
        page.body
    );
    // The window passes: signing in works again.
    b.app
        .exec(
            "UPDATE console_sign_in_failures SET at = at - interval '16 minutes' \
             WHERE $1::uuid IS NOT NULL",
            &[Uuid::nil()],
        )
        .await;
    let console = signed_in(&b.app, &b.operator_a).await;

    // A form posted from another site's page, told by Sec-Fetch-Site or Referer when the
    // browser sends no Origin: refused before anything is done.
    let path = format!("/console/rules/{}", b.plain);
    let csrf = console.get(&path).await.csrf().unwrap_or_default();
    let before = b.app.fingerprint().await;
    for (name, value) in [
        ("sec-fetch-site", "cross-site"),
        ("referer", "https://evil.example/page"),
    ] {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_static(value));
        let refused = console
            .post_with(
                &format!("{path}/pause"),
                &[("csrf", &csrf), ("reason", "from elsewhere")],
                headers,
            )
            .await;
        assert_eq!(refused.status, 403, "{name}: {}", refused.body);
    }
    assert_eq!(b.app.fingerprint().await, before, "nothing was paused");
}

#[tokio::test]
async fn a_rules_configuration_is_its_brand_admins_and_forged_or_foreign_edits_change_nothing() {
    let b = brands().await;
    let brand_of = |rule: Uuid| {
        let pool = b.app.pool.clone();
        async move {
            sqlx::query_scalar::<_, Uuid>(
                "SELECT br.brand_id FROM branch_rules x JOIN branches br ON br.id = x.branch_id \
                 WHERE x.id = $1",
            )
            .bind(rule)
            .fetch_one(&pool)
            .await
            .expect("brand")
        }
    };
    let admin_of = |brand: Uuid, name: &'static str| {
        let app = &b.app;
        async move {
            let scope = KeyScope {
                brand_ids: vec![brand],
                ..KeyScope::default()
            };
            app.token(name, Role::Admin, &scope).await
        }
    };
    // Named apart from brand B's, so a document can name it.
    Seed::new(&b.app.pool)
        .name_rule(b.plain, "Plain queue")
        .await;
    let admin_a = admin_of(brand_of(b.plain).await, "A admin").await;
    let admin_b = admin_of(brand_of(b.other).await, "B admin").await;
    let path = format!("/console/rules/{}/configuration", b.plain);
    let before = b.app.fingerprint().await;

    let admin = signed_in(&b.app, &admin_a).await;
    let page = admin.get(&path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("What a run does"), "{}", page.body);
    let rule_page = admin.get(&format!("/console/rules/{}", b.plain)).await;
    assert!(rule_page.body.contains("id=\"configuration-link\""));

    // An operator of the same brand may run the rule but not configure it.
    let operator = signed_in(&b.app, &b.operator_a).await;
    let refused = operator.get(&path).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let rule_page = operator.get(&format!("/console/rules/{}", b.plain)).await;
    assert!(!rule_page.body.contains("configuration-link"));

    // Another brand's admin: the page and its form answer as an unknown rule's.
    let foreign = signed_in(&b.app, &admin_b).await;
    let unknown = Uuid::new_v4();
    for id in [b.plain, unknown] {
        let page = foreign
            .get(&format!("/console/rules/{id}/configuration"))
            .await;
        assert_eq!(page.status, 404, "{}", page.body);
        assert!(page.body.contains(&format!("branch rule {id} not found")));
    }
    let own_csrf = foreign
        .get(&format!("/console/rules/{}/configuration", b.other))
        .await
        .csrf()
        .unwrap_or_default();
    let posted = foreign
        .post(
            &path,
            &[
                ("csrf", &own_csrf),
                ("step", "save"),
                ("from", "09:00"),
                ("to", "18:00"),
                ("message", "not mine"),
            ],
        )
        .await;
    assert_eq!(posted.status, 404, "{}", posted.body);

    // A forged token, and a value the checker refuses at its field: nothing written.
    let forged = admin
        .post(
            &path,
            &[("csrf", "0000"), ("step", "save"), ("message", "forged")],
        )
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    let csrf = page.csrf().unwrap_or_default();
    let bad = admin
        .post(
            &path,
            &[
                ("csrf", &csrf),
                ("step", "preview"),
                ("from", "09:00"),
                ("to", "25:00"),
                ("message", "a typo"),
            ],
        )
        .await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(bad.body.contains("window.to"), "{}", bad.body);
    assert_eq!(b.app.fingerprint().await, before);
}

/// A rule's page says each time once and on the branch's clock: the next run is not
/// listed again as the first of "Then", and the runners of the branch show when they were
/// seen in the branch's zone, like every other time on the page.
#[tokio::test]
async fn a_rules_page_lists_the_next_run_once_and_its_runners_on_the_branchs_clock() {
    let b = brands().await;
    let branch: Uuid = sqlx::query_scalar("SELECT branch_id FROM branch_rules WHERE id = $1")
        .bind(b.plain)
        .fetch_one(&b.app.pool)
        .await
        .expect("the branch");
    // Due on its schedule's grid (every 30 minutes), as after any run.
    b.app
        .exec(
            "UPDATE branch_rules SET next_run_time = date_trunc('hour', now()) + interval '90 minutes' \
             WHERE id = $1",
            &[b.plain],
        )
        .await;
    let site = b.app.runner_token(&[branch]).await;
    let registered = b
        .app
        .call(
            RegisterRequest::NAME,
            &site,
            serde_json::json!({"runner_id": "riyadh-1", "boot_id": "boot-a"}),
        )
        .await;
    assert_eq!(registered.status, 200, "{}", registered.body);
    let console = signed_in(&b.app, &b.viewer_a).await;
    let page = console.get(&format!("/console/rules/{}", b.plain)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    let section = |from: &str, to: &str| -> String {
        let start = body.find(from).unwrap_or_else(|| panic!("{from}: {body}"));
        let end = body[start..].find(to).map_or(body.len(), |e| start + e);
        body[start..end].to_owned()
    };
    let next = section("<dt>Next run</dt>", "</dd>");
    let then = section("<dt>Then</dt>", "</dd>");
    let stamp = |html: &str| -> Vec<String> {
        html.split("datetime=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next().map(str::to_owned))
            .collect()
    };
    let (next, then) = (stamp(&next), stamp(&then));
    assert_eq!(next.len(), 1, "{body}");
    assert_eq!(
        then.len(),
        4,
        "five next runs, the first shown as Next run: {then:?}"
    );
    assert!(
        !then.contains(&next[0]),
        "{next:?} listed again in {then:?}"
    );
    let runners = section("id=\"rule-runners\"", "</section>");
    assert!(runners.contains("riyadh-1"), "{runners}");
    assert!(
        runners.contains(" Asia/Riyadh</time>") && !runners.contains(" UTC</time>"),
        "{runners}"
    );
    // The runners page spans zones: UTC there, and it says so.
    let all = console.get("/console/runners").await;
    assert!(all.body.contains(" UTC</time>"), "{}", all.body);
}

/// docs/schedule.md: the configuration form reads a one-digit hour as documents do (`7:30`
/// is `07:30`) and saves it as `07:30`.
#[tokio::test]
async fn the_configuration_form_reads_a_one_digit_hour_as_written() {
    let b = brands().await;
    // Named apart from brand B's, so a document can name it.
    Seed::new(&b.app.pool)
        .name_rule(b.plain, "Plain queue")
        .await;
    let brand: Uuid = sqlx::query_scalar(
        "SELECT br.brand_id FROM branch_rules x JOIN branches br ON br.id = x.branch_id \
         WHERE x.id = $1",
    )
    .bind(b.plain)
    .fetch_one(&b.app.pool)
    .await
    .expect("brand");
    let admin = b.app.brand_token("A admin", Role::Admin, brand).await;
    let console = signed_in(&b.app, &admin).await;
    let path = format!("/console/rules/{}/configuration", b.plain);
    let csrf = console.get(&path).await.csrf().unwrap_or_default();
    let saved = console
        .post(
            &path,
            &[
                ("csrf", &csrf),
                ("step", "save"),
                ("from", "7:30"),
                ("to", "18:00"),
                ("message", "half past seven"),
            ],
        )
        .await;
    assert!(saved.status < 400, "{}: {}", saved.status, saved.body);
    let from: String =
        sqlx::query_scalar("SELECT operation_time_from::text FROM branch_rules WHERE id = $1")
            .bind(b.plain)
            .fetch_one(&b.app.pool)
            .await
            .expect("the window");
    assert_eq!(from, "07:30:00");
}

/// The rule page shows the last runs as a strip — a cell a run, oldest first, lettered and
/// named by status (never by colour alone), linked to the run — and the day's and week's
/// figures; a rule that never ran shows none.
#[tokio::test]
async fn a_rules_page_shows_its_runs_as_a_strip_and_the_days_figures() {
    let b = brands().await;
    let console = signed_in(&b.app, &b.viewer_a).await;
    let empty = console.get(&format!("/console/rules/{}", b.plain)).await;
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert!(!empty.body.contains("class=\"strip"), "{}", empty.body);
    assert!(
        empty
            .body
            .contains("Last 24 hours: no finished runs. Last 7 days: no finished runs."),
        "{}",
        empty.body
    );
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO executions (branch_rule_id, runner_id, status, claim_token, lease_seconds, \
                                 lease_expires_at, scheduled_at, started_at, finished_at, root_id) \
         SELECT $1, 'site-1', s.status, 't', 60, now(), now() - make_interval(mins => 10 - s.n), \
                now() - make_interval(mins => 10 - s.n), \
                now() - make_interval(mins => 10 - s.n) + make_interval(secs => s.n), \
                gen_random_uuid() \
         FROM (VALUES (1, 'completed'), (2, 'failed'), (3, 'completed')) AS s(n, status) \
         ORDER BY s.n RETURNING id",
    )
    .bind(b.plain)
    .fetch_all(&b.app.pool)
    .await
    .expect("runs");
    let page = console.get(&format!("/console/rules/{}", b.plain)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    assert!(body.contains("The last 3 runs, oldest first"), "{body}");
    let cells: Vec<usize> = ids
        .iter()
        .map(|id| {
            body.find(&format!("href=\"/console/executions/{id}\" title="))
                .unwrap_or_else(|| panic!("a cell for {id}: {body}"))
        })
        .collect();
    assert!(cells.windows(2).all(|w| w[0] < w[1]), "oldest first");
    assert!(
        body.contains("class=\"cell bad h") && body.contains("title=\"failed · 2.0 s · "),
        "{body}"
    );
    assert!(
        body.contains(
            "Last 24 hours: 3 runs, 66.7 % succeeded, median 2.0 s, p95 3.0 s. Last 7 days: 3 runs"
        ),
        "{body}"
    );
}

/// The history shows every time on its branch's clock, or every time in one zone the reader
/// picks, said above the table and kept by the paging links; a zone that is none is refused
/// naming the field.
#[tokio::test]
async fn the_history_shows_times_in_the_zone_the_reader_picks() {
    let b = brands().await;
    b.app
        .exec(
            "INSERT INTO executions (branch_rule_id, runner_id, status, claim_token, \
                 lease_seconds, lease_expires_at, scheduled_at, root_id) \
             SELECT $1, 'site-1', 'completed', 't', 60, now(), \
                    now() - make_interval(mins => g), gen_random_uuid() \
             FROM generate_series(1, 60) AS g",
            &[b.plain],
        )
        .await;
    let console = signed_in(&b.app, &b.viewer_a).await;
    let own = console.get("/console/executions").await;
    assert_eq!(own.status, 200, "{}", own.body);
    assert!(
        own.body.contains("Each time on its branch&#39;s clock")
            || own.body.contains("Each time on its branch's clock"),
        "{}",
        own.body
    );
    assert!(own.body.contains(" Asia/Riyadh</"), "{}", own.body);

    let berlin = console
        .get("/console/executions?zone=Europe%2FBerlin")
        .await;
    assert_eq!(berlin.status, 200, "{}", berlin.body);
    assert!(
        berlin.body.contains("Every time in Europe/Berlin."),
        "{}",
        berlin.body
    );
    assert!(berlin.body.contains(" Europe/Berlin</"), "{}", berlin.body);
    assert!(!berlin.body.contains(" Asia/Riyadh</"), "{}", berlin.body);
    assert!(
        berlin
            .body
            .contains("<option value=\"Europe/Berlin\" selected>"),
        "the form shows the choice: {}",
        berlin.body
    );
    // 60 runs: the Older link keeps the zone.
    assert!(
        berlin.body.contains("?zone=Europe%2FBerlin&#38;after="),
        "{}",
        berlin.body
    );

    // The older page links back to the newer one (and the newest), keeping the zone.
    let older = berlin
        .body
        .split("\" rel=\"next\"")
        .next()
        .and_then(|head| head.rsplit("href=\"").next())
        .map(|link| link.replace("&#38;", "&"))
        .expect("an Older link");
    let second = console.get(&older).await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert!(
        second.body.contains("?zone=Europe%2FBerlin&#38;before=")
            && second.body.contains("rel=\"prev\">Newer</a>"),
        "{}",
        second.body
    );
    assert!(second.body.contains(">Newest</a>"), "{}", second.body);
    assert!(
        !berlin.body.contains("rel=\"prev\""),
        "the newest page has no Newer link"
    );

    // Counts of the matching runs by status, each a link to that status.
    assert!(
        berlin.body.contains("Matching: <a href=\"/console/executions?status=completed&#38;zone=Europe%2FBerlin\" class=\"badge good\">completed 60</a>"),
        "{}",
        berlin.body
    );

    let refused = console.get("/console/executions?zone=Mars%2FOlympus").await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body.contains("zone: "), "{}", refused.body);
}

/// A running execution's page says how long it has run, the node its runner last named
/// (escaped: it comes from a site) and when it last beat; once cancelled, who did it and why.
#[tokio::test]
async fn a_running_executions_page_shows_its_node_and_heartbeat_and_who_cancelled_it() {
    let b = brands().await;
    b.app
        .exec(
            "UPDATE branch_rules SET next_run_time = now() - interval '1 minute' WHERE id = $1",
            &[b.plain],
        )
        .await;
    let branch: Uuid = sqlx::query_scalar("SELECT branch_id FROM branch_rules WHERE id = $1")
        .bind(b.plain)
        .fetch_one(&b.app.pool)
        .await
        .expect("the branch");
    let site = b.app.runner_token(&[branch]).await;
    let claim = b.app.claim(&site, b.plain, "riyadh-1").await;
    // Before its first beat (a third of the lease after the claim) the page says so.
    let console = signed_in(&b.app, &b.operator_a).await;
    let path = format!("/console/executions/{}", claim.execution);
    let starting = console.get(&path).await;
    assert!(
        starting.body.contains(
            "<dt>At node</dt><dd id=\"execution-node\">starting — its first heartbeat is due <time "
        ),
        "{}",
        starting.body
    );
    let beat = b
        .app
        .call(
            HeartbeatRequest::NAME,
            &site,
            serde_json::json!({"execution_id": claim.execution, "claim_token": claim.token,
                               "node_id": "<b>detect</b>"}),
        )
        .await;
    assert_eq!(beat.status, 200, "{}", beat.body);
    let page = console.get(&path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    assert!(
        body.contains("<dt>Elapsed</dt><dd id=\"execution-elapsed\">"),
        "{body}"
    );
    assert!(
        body.contains(
            "<dt>At node</dt><dd id=\"execution-node\">&#60;b&#62;detect&#60;/b&#62;</dd>"
        ),
        "{body}"
    );
    assert!(
        body.contains("<dt>Last heartbeat</dt><dd id=\"execution-heartbeat\"><time "),
        "{body}"
    );
    assert!(body.contains("<dt>Lease ends</dt>"), "{body}");
    assert!(!body.contains("<b>detect"), "{body}");
    assert!(!body.contains("starting —"), "it has beaten: {body}");

    let csrf = page.csrf().unwrap_or_default();
    let cancelled = console
        .post(
            &format!("{path}/cancel"),
            &[("csrf", &csrf), ("reason", "camera <moved>")],
        )
        .await;
    assert_eq!(cancelled.status, 303, "{}", cancelled.body);
    let page = console.get(&path).await;
    let body = &page.body;
    assert!(
        body.contains("<dd id=\"execution-stopped\">cancelled by A admin at <time "),
        "{body}"
    );
    assert!(body.contains(": “camera &#60;moved&#62;”"), "{body}");
}

/// The branch rules of the group form on `body` that lists `count` of them.
fn group_ids(body: &str, count: usize) -> Option<String> {
    body.split("name=\"rules\" value=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .find(|ids| ids.split(',').count() == count)
        .map(str::to_owned)
}

async fn paused(app: &TestApp, ids: &[Uuid]) -> Vec<(Option<String>, Option<String>)> {
    sqlx::query_as(
        "SELECT paused_by, pause_reason FROM branch_rules WHERE id = ANY($1) ORDER BY id",
    )
    .bind(ids)
    .fetch_all(&app.pool)
    .await
    .expect("the rules")
}

/// The fleet page totals the fleet and shows a rule failing at 15 branches as one group;
/// a group pause pauses the 15 with one reason; an id outside the scope in a group is
/// refused as unknown while the rest go through; a bad action or reason changes nothing.
#[tokio::test]
async fn a_group_of_fifteen_is_paused_with_one_reason_and_each_refusal_is_listed() {
    let b = brands().await;
    let brand: Uuid = sqlx::query_scalar(
        "SELECT b.brand_id FROM branch_rules br JOIN branches b ON b.id = br.branch_id \
         WHERE br.id = $1",
    )
    .bind(b.plain)
    .fetch_one(&b.app.pool)
    .await
    .expect("brand A");
    let failing = Seed::new(&b.app.pool)
        .failing_rule(brand, "Camera check", 15)
        .await;
    let console = signed_in(&b.app, &b.operator_a).await;
    let page = console.get("/console/").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    assert!(
        body.contains("<h2 id=\"totals-h\">At a glance</h2>"),
        "{body}"
    );
    assert!(body.contains(" at 16 branches</dd>"), "{body}");
    assert!(
        body.contains("Camera check at 15 branches of Brand: failed 3 to 4 times in a row, since "),
        "{body}"
    );
    assert!(
        body.contains("camera 15 offline"),
        "each branch's own reason: {body}"
    );
    let ids = group_ids(body, 15).expect("the group's form");
    let csrf = page.csrf().unwrap_or_default();
    let before = paused(&b.app, &failing).await;

    // A viewer sees the groups without the form, and a forged post is refused.
    let viewer = signed_in(&b.app, &b.viewer_a).await;
    let read = viewer.get("/console/").await;
    assert!(
        read.body.contains("Camera check at 15 branches"),
        "{}",
        read.body
    );
    assert!(!read.body.contains("/console/fleet/group"), "{}", read.body);
    let forged = viewer
        .post(
            "/console/fleet/group",
            &[
                ("csrf", &read.csrf().unwrap_or_default()),
                ("action", "pause"),
                ("reason", "x"),
                ("rules", &ids),
            ],
        )
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert_eq!(paused(&b.app, &failing).await, before);

    // Refused before anything is touched: an action groups do not take, an empty reason.
    for (action, reason, field) in [
        ("force-stop", "incident", "action"),
        ("pause", " ", "reason"),
    ] {
        let refused = console
            .post(
                "/console/fleet/group",
                &[
                    ("csrf", &csrf),
                    ("action", action),
                    ("reason", reason),
                    ("rules", &ids),
                ],
            )
            .await;
        assert_eq!(refused.status, 422, "{}", refused.body);
        assert!(refused.body.contains(field), "{}", refused.body);
        assert_eq!(paused(&b.app, &failing).await, before);
    }

    // Acknowledged for an hour: the group is shown apart, with who, until when and why.
    let acked = console
        .post(
            "/console/fleet/group",
            &[
                ("csrf", &csrf),
                ("action", "ack-1h"),
                ("reason", "vendor <on site>"),
                ("rules", &ids),
            ],
        )
        .await;
    assert_eq!(acked.status, 200, "{}", acked.body);
    assert!(
        acked.body.contains("Acknowledge: 15 of 15 done."),
        "{}",
        acked.body
    );
    assert!(
        acked.body.contains(
            "<span class=\"badge quiet\">acknowledged</span> Camera check at 15 branches"
        ),
        "{}",
        acked.body
    );
    assert!(
        acked.body.contains("acknowledged by A admin until <time ")
            && acked.body.contains(": “vendor &#60;on site&#62;”"),
        "{}",
        acked.body
    );

    let rule_page = console.get(&format!("/console/rules/{}", failing[0])).await;
    assert!(
        rule_page
            .body
            .contains("<dt>Acknowledged</dt><dd id=\"acknowledged\">by A admin until <time "),
        "{}",
        rule_page.body
    );
    // The rules list shows it on each of the 15 rows, escaped like every other text.
    let listed = console.get("/console/rules?name=Camera%20check").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(
        listed
            .body
            .matches("<span class=\"ack\">acknowledged by A admin until <time ")
            .count(),
        15,
        "{}",
        listed.body
    );
    assert!(
        listed.body.contains(": “vendor &#60;on site&#62;”"),
        "{}",
        listed.body
    );

    let done = console
        .post(
            "/console/fleet/group",
            &[
                ("csrf", &csrf),
                ("action", "pause"),
                ("reason", "camera firmware"),
                ("rules", &ids),
            ],
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains("Pause: 15 of 15 done."), "{}", done.body);
    let want = (
        Some("A admin".to_owned()),
        Some("camera firmware".to_owned()),
    );
    assert_eq!(paused(&b.app, &failing).await, vec![want; 15]);

    // Brand B's rule in the list: refused as an unknown one would be, the rest resumed.
    let with_other = format!("{ids},{}", b.other);
    let resumed = console
        .post(
            "/console/fleet/group",
            &[
                ("csrf", &csrf),
                ("action", "resume"),
                ("reason", "firmware fixed"),
                ("rules", &with_other),
            ],
        )
        .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert!(
        resumed.body.contains("Resume: 15 of 16 done; refused:"),
        "{}",
        resumed.body
    );
    assert!(
        resumed.body.contains(&format!(
            "branch rule {}: branch rule {} not found",
            b.other, b.other
        )),
        "{}",
        resumed.body
    );
    assert_eq!(paused(&b.app, &failing).await, vec![(None, None); 15]);
    let touched: i64 =
        sqlx::query_scalar("SELECT count(*) FROM operator_actions WHERE branch_rule_id = $1")
            .bind(b.other)
            .fetch_one(&b.app.pool)
            .await
            .expect("B's audit");
    assert_eq!(touched, 0);
}

#[tokio::test]
async fn an_executions_page_shows_its_programs_output_escaped_with_the_cut_marked() {
    let b = brands().await;
    b.app
        .exec(
            "UPDATE branch_rules SET next_run_time = now() - interval '1 minute' WHERE id = $1",
            &[b.plain],
        )
        .await;
    let branch: Uuid = sqlx::query_scalar("SELECT branch_id FROM branch_rules WHERE id = $1")
        .bind(b.plain)
        .fetch_one(&b.app.pool)
        .await
        .expect("the branch");
    let site = b.app.runner_token(&[branch]).await;
    let claim = b.app.claim(&site, b.plain, "riyadh-1").await;
    let tail = format!("{}the last line\n", "z".repeat(65_536 - 14));
    let output = serde_json::json!([
        {"node_id": "detect", "visit": 1, "stream": "stdout", "text": "{\"people\": 2}\n"},
        {"node_id": "detect", "visit": 1, "stream": "stderr", "text": tail, "cut_bytes": 983_040},
        {"node_id": "notify", "visit": 1, "stream": "stderr",
         "text": "</pre><script>alert(1)</script>\u{1b}[2J\u{1b}]0;owned\u{7}done\n"},
    ]);
    let report = b
        .app
        .call(
            SetNextRunTimeRequest::NAME,
            &site,
            serde_json::json!({"branch_rule_id": b.plain, "is_last_run_failed": false,
                               "execution_id": claim.execution, "claim_token": claim.token,
                               "status": "completed", "output": output,
                               "result": {"nodes": [
                                   {"node_id": "detect", "node_type": "detection", "visit": 1, "status": "completed"},
                                   {"node_id": "notify", "node_type": "business", "visit": 1, "status": "completed"}]}}),
        )
        .await;
    assert_eq!(report.status, 200, "{}", report.body);
    let console = signed_in(&b.app, &b.viewer_a).await;
    let page = console
        .get(&format!("/console/executions/{}", claim.execution))
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    assert!(
        body.contains("<summary>detect · stderr · 1,048,576 bytes, the last 65,536 kept</summary>"),
        "{}",
        nodes_and_output(body)
    );
    assert!(
        body.contains(
            "<span class=\"cut\">[… 983,040 bytes cut; the last 65,536 of 1,048,576 bytes follow …]</span>"
        ),
        "{}", nodes_and_output(body)
    );
    assert!(
        body.contains("the last line\n</pre>"),
        "{}",
        nodes_and_output(body)
    );
    assert!(
        body.contains("{&#34;people&#34;: 2}"),
        "{}",
        nodes_and_output(body)
    );
    // Escaped for HTML, and its control characters shown rather than sent.
    assert!(
        body.contains("&#60;/pre&#62;&#60;script&#62;alert(1)&#60;/script&#62;\\u{1b}[2J\\u{1b}]0;owned\\u{7}done"),
        "{}", nodes_and_output(body)
    );
    assert!(
        !body.contains("<script>alert"),
        "{}",
        nodes_and_output(body)
    );
    assert!(!body.contains('\u{1b}'), "no raw ESC on the page");
    // Each node run links to its streams.
    assert!(
        body.contains("<a href=\"#output-1\">stdout</a> <a href=\"#output-2\">stderr</a>"),
        "{}",
        nodes_and_output(body)
    );
}

/// The nodes table and the start of the output, for a failed assertion's message (a page
/// with 64 KiB of output is too long to print whole).
fn nodes_and_output(body: &str) -> String {
    let start = body.find("id=\"nodes\"").unwrap_or(0);
    body[start..].chars().take(1_500).collect()
}
