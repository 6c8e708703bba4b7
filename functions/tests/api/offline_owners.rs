//! Offline owners over real HTTP and PostgreSQL: the plan designates exactly one runner per
//! branch to run its rules while the functions are unreachable, hands the branch over when
//! that runner goes stale (only to a runner that has been back for as long), and never
//! shows or hands anything across a brand's wall.

use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_shared::wire::{Call, PlanRequest, RunnerListRequest};
use res_tests::functions as support;
use serde_json::{Value, json};
use support::{Seed, TestApp};
use uuid::Uuid;

/// Asks for a plan as `runner`, saying it runs rules offline when it owns them (or that it
/// never does); the answer's offline owners.
async fn owners(app: &TestApp, token: &str, runner: &str, runs_offline: bool) -> Value {
    ask(app, token, runner, Some(runs_offline)).await
}

/// [`owners`], saying nothing about running offline when `runs_offline` is `None`.
async fn ask(app: &TestApp, token: &str, runner: &str, runs_offline: Option<bool>) -> Value {
    let health = runs_offline.map(|runs| json!({"runs_offline": runs}));
    request(app, token, runner, health, None).await.body["offline_owners"].clone()
}

/// Asks for a plan as `runner` with `health` (none: no health at all) and, for a delta,
/// the cursor `since`: the answer, which must be a 200.
async fn request(
    app: &TestApp,
    token: &str,
    runner: &str,
    health: Option<Value>,
    since: Option<&Value>,
) -> support::Reply {
    let mut body = json!({"runner_id": runner});
    if let Some(health) = health {
        body["health"] = health;
    }
    if let Some(cursor) = since {
        body["since"] = cursor.clone();
    }
    let reply = app.call(PlanRequest::NAME, token, body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply
}

/// The owner of `branch` in an answer's `offline_owners`: (runner_id, is_you).
fn owner_of(owners: &Value, branch: Uuid) -> Option<(String, bool)> {
    owners.as_array()?.iter().find_map(|o| {
        (o["branch_id"] == json!(branch)).then(|| {
            (
                o["runner_id"].as_str().unwrap_or_default().to_owned(),
                o["is_you"] == true,
            )
        })
    })
}

/// Makes `runner` silent for `seconds` (and, with `back_for`, in contact again since that
/// many seconds), as if time had passed.
async fn age(app: &TestApp, runner: &str, seconds: i64, back_for: Option<i64>) {
    sqlx::query(
        "UPDATE runners SET last_seen_at = now() - make_interval(secs => $2), \
                last_plan_at = now() - make_interval(secs => $2), \
                online_since = now() - make_interval(secs => COALESCE($3, $2 + 1000)) \
         WHERE runner_id = $1",
    )
    .bind(runner)
    .bind(seconds as f64)
    .bind(back_for.map(|s| s as f64))
    .execute(&app.pool)
    .await
    .expect("age the runner");
}

/// Makes every designation older than the stale time, so it may be handed over.
async fn age_designations(app: &TestApp) {
    sqlx::query("UPDATE branch_offline_owners SET since = now() - interval '1 day'")
        .execute(&app.pool)
        .await
        .expect("age the designations");
}

async fn branch(app: &TestApp) -> (Uuid, Uuid) {
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("Asia/Riyadh").await;
    (brand, seed.branch(brand, None).await)
}

#[tokio::test]
async fn the_first_runner_to_ask_owns_the_branch_and_every_runner_of_it_is_told_who() {
    let app = TestApp::start().await;
    let (_, branch) = branch(&app).await;
    let key = app.runner_token(&[branch]).await;
    let second_key = app.runner_token(&[branch]).await;

    let a = owners(&app, &key, "site-a", true).await;
    assert_eq!(owner_of(&a, branch), Some(("site-a".into(), true)));
    // Another runner of the branch, with the same key or its own, holds for it.
    for (token, runner) in [(&key, "site-b"), (&second_key, "site-c")] {
        let seen = owners(&app, token, runner, true).await;
        assert_eq!(owner_of(&seen, branch), Some(("site-a".into(), false)));
        assert!(seen[0]["last_plan_at"].is_string(), "{seen}");
    }
    // The same runner id under another key is another runner.
    let a_again = owners(&app, &second_key, "site-a", true).await;
    assert_eq!(owner_of(&a_again, branch), Some(("site-a".into(), false)));
    // The owner goes on owning.
    let a = owners(&app, &key, "site-a", true).await;
    assert_eq!(owner_of(&a, branch), Some(("site-a".into(), true)));
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM branch_offline_owners")
        .fetch_one(&app.pool)
        .await
        .expect("owners");
    assert_eq!(rows, 1);

    // The registry shows it to operators.
    let operator = app
        .token(
            "admin",
            Role::Operator,
            &KeyScope {
                branch_ids: vec![branch],
                ..KeyScope::default()
            },
        )
        .await;
    let listed = app
        .call(RunnerListRequest::NAME, &operator, json!({}))
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let flags: Vec<(String, bool)> = listed.body["runners"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["runner_id"].as_str().unwrap_or_default().to_owned(),
                r["branches"][0]["offline_owner"] == true,
            )
        })
        .collect();
    assert_eq!(
        flags.iter().filter(|(_, owns)| *owns).count(),
        1,
        "{flags:?}"
    );
    assert!(flags.contains(&("site-a".into(), true)), "{flags:?}");
}

#[tokio::test]
async fn eight_runners_asking_at_once_agree_on_one_owner() {
    let app = TestApp::start().await;
    let (_, branch) = branch(&app).await;
    let key = app.runner_token(&[branch]).await;
    let answers = futures_util::future::join_all((0..8).map(|i| {
        let (app, key) = (&app, &key);
        async move { owners(app, key, &format!("site-{i}"), true).await }
    }))
    .await;
    let mine = answers
        .iter()
        .filter(|a| owner_of(a, branch).is_some_and(|(_, you)| you))
        .count();
    assert_eq!(
        mine, 1,
        "exactly one is told it owns the branch: {answers:?}"
    );
    let owner: String = sqlx::query_scalar("SELECT runner_id FROM branch_offline_owners")
        .fetch_one(&app.pool)
        .await
        .expect("one owner");
    // Every later answer names that one.
    for i in 0..8 {
        let seen = owners(&app, &key, &format!("site-{i}"), true).await;
        let (named, you) = owner_of(&seen, branch).expect("an owner");
        assert_eq!(named, owner);
        assert_eq!(you, format!("site-{i}") == owner);
    }
}

#[tokio::test]
async fn a_stale_owner_is_handed_over_only_to_a_runner_that_has_been_back_as_long() {
    let app = TestApp::start().await;
    let (_, branch) = branch(&app).await;
    let key = app.runner_token(&[branch]).await;
    owners(&app, &key, "site-a", true).await;
    owners(&app, &key, "site-b", true).await;
    // Designated long ago, then silent past the stale time (60 s).
    age_designations(&app).await;
    age(&app, "site-a", 120, None).await;

    // site-b is back from the same outage only now: the owner may still be delivering its
    // offline runs, so the branch stays with it.
    age(&app, "site-b", 90, Some(0)).await;
    let b = owners(&app, &key, "site-b", true).await;
    assert_eq!(owner_of(&b, branch), Some(("site-a".into(), false)));

    // site-b has been in contact for longer than the stale time: it takes over.
    age(&app, "site-b", 0, Some(61)).await;
    let b = owners(&app, &key, "site-b", true).await;
    assert_eq!(owner_of(&b, branch), Some(("site-b".into(), true)));

    // The old owner comes back and learns it no longer owns the branch.
    let a = owners(&app, &key, "site-a", true).await;
    assert_eq!(owner_of(&a, branch), Some(("site-b".into(), false)));
}

#[tokio::test]
async fn a_runner_that_never_runs_offline_is_not_designated_and_gives_its_branches_up() {
    let app = TestApp::start().await;
    let (_, branch) = branch(&app).await;
    let key = app.runner_token(&[branch]).await;
    let never = owners(&app, &key, "site-a", false).await;
    assert_eq!(never, json!([]), "no owner yet, and not this one");
    let b = owners(&app, &key, "site-b", true).await;
    assert_eq!(owner_of(&b, branch), Some(("site-b".into(), true)));
    // A caller that does not say (a person with curl and the site's token) changes nothing.
    for (runner, is_owner) in [("site-b", true), ("site-c", false)] {
        let plain = ask(&app, &key, runner, None).await;
        assert_eq!(owner_of(&plain, branch), Some(("site-b".into(), is_owner)));
    }

    // The owner restarts with offline_execution = false: the branch is free again.
    let given_up = owners(&app, &key, "site-b", false).await;
    assert_eq!(given_up, json!([]));
    let a = owners(&app, &key, "site-a", true).await;
    assert_eq!(owner_of(&a, branch), Some(("site-a".into(), true)));
}

#[tokio::test]
async fn a_revoked_owner_is_replaced_and_service_keys_own_nothing() {
    let app = TestApp::start().await;
    let (_, branch) = branch(&app).await;
    let old_key = app.runner_token(&[branch]).await;
    let new_key = app.runner_token(&[branch]).await;
    owners(&app, &old_key, "site-a", true).await;
    owners(&app, &new_key, "site-b", true).await;
    sqlx::query(
        "UPDATE api_keys SET revoked_at = now() WHERE id = \
         (SELECT key_id FROM branch_offline_owners)",
    )
    .execute(&app.pool)
    .await
    .expect("revoke");
    age_designations(&app).await;
    age(&app, "site-b", 0, Some(61)).await;
    let b = owners(&app, &new_key, "site-b", true).await;
    assert_eq!(owner_of(&b, branch), Some(("site-b".into(), true)));

    let service = owners(&app, &app.service, "central", true).await;
    assert_eq!(service, json!([]), "a service key is not a site's runner");
}

#[tokio::test]
async fn another_brands_runner_never_learns_or_takes_a_branch_it_does_not_serve() {
    let app = TestApp::start().await;
    let (_, mine) = branch(&app).await;
    let (_, theirs) = branch(&app).await;
    let my_key = app.runner_token(&[mine]).await;
    let their_key = app.runner_token(&[theirs]).await;
    owners(&app, &my_key, "site-a", true).await;
    let seen = owners(&app, &their_key, "site-z", true).await;
    assert_eq!(owner_of(&seen, mine), None, "{seen}");
    assert_eq!(owner_of(&seen, theirs), Some(("site-z".into(), true)));
    // Even with the branch's owner long gone, only the branch's own runners may take it.
    age(&app, "site-a", 3_600, None).await;
    age_designations(&app).await;
    age(&app, "site-z", 0, Some(3_600)).await;
    owners(&app, &their_key, "site-z", true).await;
    let owner: String =
        sqlx::query_scalar("SELECT runner_id FROM branch_offline_owners WHERE branch_id = $1")
            .bind(mine)
            .fetch_one(&app.pool)
            .await
            .expect("owner");
    assert_eq!(owner, "site-a");
}

/// The registry row's and the designation's row versions (`xmin`): they move only when a
/// statement writes the row.
async fn row_versions(app: &TestApp, runner: &str) -> (String, String) {
    sqlx::query_as(
        "SELECT r.xmin::text, o.xmin::text FROM runners r \
         JOIN branch_offline_owners o ON (o.key_id, o.runner_id) = (r.key_id, r.runner_id) \
         WHERE r.runner_id = $1",
    )
    .bind(runner)
    .fetch_one(&app.pool)
    .await
    .expect("the runner owns a branch")
}

/// Asks as `site-a` with `health` (and the cursor `since`, for a delta): the answer.
async fn ask_with(
    app: &TestApp,
    token: &str,
    health: Value,
    since: Option<&Value>,
) -> support::Reply {
    request(app, token, "site-a", Some(health), since).await
}

#[tokio::test]
async fn asking_again_with_nothing_new_writes_nothing_and_anything_new_is_written_at_once() {
    let app = TestApp::start().await;
    let (_, branch) = branch(&app).await;
    let key = app.runner_token(&[branch]).await;
    let health = json!({"runs_offline": true, "outbox_depth": 2, "version": "0.3.0"});
    let first = ask_with(&app, &key, health.clone(), None).await;
    assert_eq!(
        owner_of(&first.body["offline_owners"], branch),
        Some(("site-a".into(), true))
    );
    let written = row_versions(&app, "site-a").await;

    // Nothing new, for a full plan and for a delta: the same answer, no row written.
    let cursor = first.body["cursor"].clone();
    for since in [None, Some(&cursor)] {
        let again = ask_with(&app, &key, health.clone(), since).await;
        assert_eq!(
            again.body["offline_owners"], first.body["offline_owners"],
            "since {since:?}"
        );
        assert_eq!(
            row_versions(&app, "site-a").await,
            written,
            "since {since:?}"
        );
    }

    // Each new thing the runner says is written by the request that says it, on both paths.
    let changes = [
        (
            "outbox_depth",
            json!({"runs_offline": true, "outbox_depth": 0, "version": "0.3.0"}),
        ),
        (
            "version",
            json!({"runs_offline": true, "outbox_depth": 0, "version": "0.3.1"}),
        ),
        (
            "state_unwritable_since",
            json!({"runs_offline": true, "outbox_depth": 0, "version": "0.3.1",
                   "state_unwritable_since": "2026-11-29T10:00:00Z"}),
        ),
        (
            "last_outage",
            json!({"runs_offline": true, "outbox_depth": 0, "version": "0.3.1",
                   "state_unwritable_since": "2026-11-29T10:00:00Z",
                   "last_outage": {"started_at": "2026-11-29T09:00:00Z",
                                   "ended_at": "2026-11-29T09:05:00Z"}}),
        ),
    ];
    let mut before = written;
    for (i, (field, health)) in changes.iter().enumerate() {
        let since = (i % 2 == 1).then_some(&cursor);
        ask_with(&app, &key, health.clone(), since).await;
        let now = row_versions(&app, "site-a").await;
        assert_ne!(now.0, before.0, "a new {field} is written");
        let (depth, version, unwritable, outage): (Option<i32>, Option<String>, bool, bool) =
            sqlx::query_as(
                "SELECT outbox_depth, version, state_unwritable_since IS NOT NULL, \
                        last_outage_started_at IS NOT NULL \
                 FROM runners WHERE runner_id = 'site-a'",
            )
            .fetch_one(&app.pool)
            .await
            .expect("the registry row");
        assert_eq!(depth, Some(0), "after {field}");
        assert_eq!(
            version.as_deref(),
            Some(if i == 0 { "0.3.0" } else { "0.3.1" })
        );
        assert_eq!((unwritable, outage), (i >= 2, i >= 3), "after {field}");
        before = now;
    }

    // Presence half the stale time (60 s) old is renewed.
    let last = changes[changes.len() - 1].1.clone();
    age(&app, "site-a", 31, None).await;
    let aged = row_versions(&app, "site-a").await;
    ask_with(&app, &key, last.clone(), Some(&cursor)).await;
    assert_ne!(
        row_versions(&app, "site-a").await.0,
        aged.0,
        "presence renewed"
    );
    let fresh: bool = sqlx::query_scalar(
        "SELECT last_seen_at > now() - interval '5 seconds' FROM runners WHERE runner_id = 'site-a'",
    )
    .fetch_one(&app.pool)
    .await
    .expect("presence");
    assert!(fresh);

    // Saying it no longer runs offline gives the branch up at once, on the delta path too.
    let mut gives_up = last;
    gives_up["runs_offline"] = json!(false);
    let released = ask_with(&app, &key, gives_up, Some(&cursor)).await;
    assert_eq!(owner_of(&released.body["offline_owners"], branch), None);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM branch_offline_owners")
        .fetch_one(&app.pool)
        .await
        .expect("owners");
    assert_eq!(rows, 0);
}
