//! `executions_list` pages both ways: `next` as `after` for older runs, `previous` as
//! `before` for newer ones, each page newest first and the same rows whichever way it was
//! reached.

use res_functions::auth::Role;
use res_shared::wire::{Call, ExecutionListRequest, ExecutionListResponse, MAX_COUNTED};
use res_tests::functions as support;
use serde_json::{Value, json};
use support::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

async fn list(app: &TestApp, token: &str, body: Value) -> (u16, Value) {
    let reply = app.call(ExecutionListRequest::NAME, token, body).await;
    (reply.status, reply.body)
}

fn page(body: &Value) -> (Vec<Uuid>, Option<String>, Option<String>) {
    let answer: ExecutionListResponse = serde_json::from_value(body.clone()).expect("a page");
    (
        answer.executions.iter().map(|e| e.execution_id).collect(),
        answer.next,
        answer.previous,
    )
}

#[tokio::test]
async fn newer_and_older_pages_hold_the_same_rows_whichever_way_they_are_reached() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let branch = seed.branch(brand, None).await;
    let rule = seed.branch_rule(branch, RuleSpec::default()).await;
    // Seven runs a minute apart, newest first in `runs`.
    let runs: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO executions (branch_rule_id, runner_id, status, claim_token, lease_seconds, \
                                 lease_expires_at, scheduled_at, root_id) \
         SELECT $1, 'site-1', 'completed', 't', 60, now(), now() - make_interval(mins => g), \
                gen_random_uuid() \
         FROM generate_series(1, 7) AS g ORDER BY g RETURNING id",
    )
    .bind(rule)
    .fetch_all(&app.pool)
    .await
    .expect("runs");
    let viewer = app.brand_token("victor", Role::Viewer, brand).await;
    let ask = |extra: Value| {
        let mut body = json!({"branch_rule_id": rule, "limit": 3});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        body
    };

    let (status, first) = list(&app, &viewer, ask(json!({}))).await;
    assert_eq!(status, 200, "{first}");
    let (rows, next, previous) = page(&first);
    assert_eq!(rows, runs[0..3]);
    assert_eq!(previous, None, "the newest page has nothing newer");
    let (_, second) = list(&app, &viewer, ask(json!({"after": next}))).await;
    let (rows, next, previous) = page(&second);
    assert_eq!(rows, runs[3..6]);
    let (_, third) = list(&app, &viewer, ask(json!({"after": next}))).await;
    let (rows, next, back_from_third) = page(&third);
    assert_eq!((rows, next), (runs[6..7].to_vec(), None));

    // Back: from the third page to the second, from the second to the first.
    let (status, again) = list(&app, &viewer, ask(json!({"before": back_from_third}))).await;
    assert_eq!(status, 200, "{again}");
    let (rows, older, newer) = page(&again);
    assert_eq!(rows, runs[3..6]);
    assert!(older.is_some() && newer.is_some());
    let (_, top) = list(&app, &viewer, ask(json!({"before": previous}))).await;
    let (rows, older, newer) = page(&top);
    assert_eq!(rows, runs[0..3]);
    assert_eq!(newer, None, "back at the newest page");
    // Its `next` leads on to the same second page.
    let (_, on) = list(&app, &viewer, ask(json!({"after": older}))).await;
    assert_eq!(page(&on).0, runs[3..6]);

    // Both directions at once, or a forged cursor, are refused naming the field.
    let (status, both) = list(
        &app,
        &viewer,
        ask(json!({"after": page(&second).1, "before": page(&second).2})),
    )
    .await;
    assert_eq!(status, 422, "{both}");
    assert!(
        both["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("before:")),
        "{both}"
    );
    let (status, forged) = list(&app, &viewer, ask(json!({"before": "bm90IGEgY3Vyc29y"}))).await;
    assert_eq!(status, 400, "{forged}");
    assert!(
        forged["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("before is not a cursor")),
        "{forged}"
    );

    // Another brand's viewer with the same cursor reads nothing of this brand.
    let other = seed.brand("UTC").await;
    let stranger = app.brand_token("stranger", Role::Viewer, other).await;
    let without = list(&app, &stranger, ask(json!({}))).await;
    let with = list(&app, &stranger, ask(json!({"before": back_from_third}))).await;
    assert_eq!(with.0, 200, "{}", with.1);
    assert_eq!(with.1["executions"], json!([]));
    assert_eq!(
        (with.0, &with.1["executions"]),
        (without.0, &without.1["executions"]),
        "a cursor shows another brand's key nothing its filters do not"
    );
}

/// `counts` counts the matching runs by status with the status filter aside — what the
/// filter chooses among — and only in the caller's scope.
#[tokio::test]
async fn counts_are_by_status_for_the_filter_and_stay_in_scope() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let branch = seed.branch(brand, None).await;
    let rule = seed.branch_rule(branch, RuleSpec::default()).await;
    let other_rule = seed.branch_rule(branch, RuleSpec::default()).await;
    for (on, status, count) in [
        (rule, "completed", 4),
        (rule, "failed", 2),
        (rule, "crashed", 1),
        (other_rule, "failed", 5),
    ] {
        sqlx::query(
            "INSERT INTO executions (branch_rule_id, runner_id, status, claim_token, \
                 lease_seconds, lease_expires_at, scheduled_at, root_id) \
             SELECT $1, 'site-1', $2, 't', 60, now(), now() - make_interval(mins => g), \
                    gen_random_uuid() FROM generate_series(1, $3) AS g",
        )
        .bind(on)
        .bind(status)
        .bind(count)
        .execute(&app.pool)
        .await
        .expect("runs");
    }
    let viewer = app.brand_token("victor", Role::Viewer, brand).await;
    let (status, failed) = list(
        &app,
        &viewer,
        json!({"branch_rule_id": rule, "status": "failed", "counts": true, "limit": 1}),
    )
    .await;
    assert_eq!(status, 200, "{failed}");
    assert_eq!(failed["executions"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        failed["counts"],
        json!({"by_status": {"completed": 4, "failed": 2, "crashed": 1}, "capped": false})
    );
    // Without asking, no counts; a cursor of a counted page serves an uncounted one.
    let (_, plain) = list(
        &app,
        &viewer,
        json!({"branch_rule_id": rule, "status": "failed", "limit": 1, "after": failed["next"]}),
    )
    .await;
    assert_eq!(
        plain["executions"].as_array().map(Vec::len),
        Some(1),
        "{plain}"
    );
    assert!(plain.get("counts").is_none(), "{plain}");

    // Past the cap, the counts cover the cap and one, and say so.
    sqlx::query(
        "INSERT INTO executions (branch_rule_id, runner_id, status, claim_token, \
             lease_seconds, lease_expires_at, scheduled_at, root_id) \
         SELECT $1, 'site-1', 'completed', 't', 60, now(), now() - make_interval(secs => g), \
                gen_random_uuid() FROM generate_series(1, $2) AS g",
    )
    .bind(other_rule)
    .bind(i32::try_from(MAX_COUNTED).unwrap_or(i32::MAX))
    .execute(&app.pool)
    .await
    .expect("many runs");
    let (_, many) = list(&app, &viewer, json!({"branch_id": branch, "counts": true})).await;
    assert_eq!(many["counts"]["capped"], true, "{}", many["counts"]);
    let counted: i64 = many["counts"]["by_status"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_i64).sum())
        .unwrap_or_default();
    assert_eq!(counted, MAX_COUNTED + 1);

    let stranger = app
        .brand_token("stranger", Role::Viewer, seed.brand("UTC").await)
        .await;
    let (status, theirs) = list(
        &app,
        &stranger,
        json!({"branch_rule_id": rule, "counts": true}),
    )
    .await;
    let (_, unknown) = list(
        &app,
        &stranger,
        json!({"branch_rule_id": Uuid::new_v4(), "counts": true}),
    )
    .await;
    assert_eq!(status, 200, "{theirs}");
    assert_eq!(
        theirs, unknown,
        "another brand's rule counts as an unknown one"
    );
    assert_eq!(theirs["counts"], json!({"by_status": {}, "capped": false}));
}
