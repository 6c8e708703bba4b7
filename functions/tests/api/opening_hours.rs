//! Opening hours through the functions over real PostgreSQL: a brand document with a
//! branch's week and a calendar is applied, stored as written (export gives it back) and
//! resolved; claims, reports, describe, the plan (format 4, and older formats leaving out
//! what an older runner cannot honour) and the delta all answer as res-shared does; missed
//! runs follow `catch_up`; bad hours are refused at their paths with nothing written; and
//! another brand sees none of it.

use std::sync::Arc;

use chrono::{DateTime, Days, NaiveDate, TimeDelta, Timelike, Utc};
use res_functions::auth::Role;
use res_shared::schedule::{
    OpeningHours, Recurrence, Restriction, Schedule, Timetable, Validity, WindowPosition, Zone,
};
use res_shared::wire::{
    Call, ClaimRequest, ConfigApplyRequest, ConfigExportRequest, DescribeRuleRequest, PlanRequest,
    SetNextRunTimeRequest,
};
use res_tests::functions::TestApp;
use serde_json::{Value, json};
use uuid::Uuid;

struct Brand {
    app: TestApp,
    brand: Uuid,
    admin: String,
    other_admin: String,
    /// The hours every day: from an hour before now to two hours after (UTC).
    interval: String,
    today: NaiveDate,
}

/// The catalogue (three rules on one detector) and an empty brand, written as SQL.
async fn brand() -> Brand {
    let app = TestApp::start().await;
    let (brand, other): (Uuid, Uuid) = sqlx::query_as(
        "WITH t AS (INSERT INTO action_templates (name, kind, config) VALUES \
              ('Detector', 'detection', '{\"executor\": \"http\", \"url\": \"http://127.0.0.1:9/d\"}') \
              RETURNING id), \
         r AS (INSERT INTO rules (name, status, cron_expression) VALUES \
              ('Queue length', 'active', '*/15 * * * *'), ('Shelves', 'active', '@opening +10m'), \
              ('Lights', 'active', '0 * * * *') RETURNING id), \
         c AS (INSERT INTO action_template_connections (rule_id, workflow_config) \
               SELECT r.id, jsonb_build_object('start_node', 'd', 'nodes', jsonb_build_object( \
                   'd', jsonb_build_object('type', 'detection', 'action_template_id', t.id))) \
               FROM r, t RETURNING rule_id), \
         a AS (INSERT INTO brands (name, timezone) VALUES ('Acme', 'UTC') RETURNING id), \
         b AS (INSERT INTO brands (name, timezone) VALUES ('Other', 'UTC') RETURNING id) \
         SELECT a.id, b.id FROM a, b, (SELECT count(*) FROM c) n",
    )
    .fetch_one(&app.pool)
    .await
    .expect("catalogue and brands");
    let now = app.db_now().await;
    let hour = now.hour();
    let interval = format!("{:02}:00-{:02}:00", (hour + 23) % 24, (hour + 2) % 24);
    Brand {
        admin: app.brand_token("acme admin", Role::Admin, brand).await,
        other_admin: app.brand_token("other admin", Role::Admin, other).await,
        app,
        brand,
        interval,
        today: now.date_naive(),
    }
}

impl Brand {
    /// Olaya opens `interval` every day with the `holidays` calendar attached; Malqa has no
    /// hours. `holiday` is the calendar's one closed range (none: an empty calendar).
    fn document(&self, holiday: Option<(NaiveDate, NaiveDate)>, malqa_rule: &str) -> String {
        let days = holiday.map_or(String::new(), |(from, until)| {
            format!("      - {{date: \"{from}\", until: \"{until}\", name: Test Day}}\n")
        });
        format!(
            "brand:\n  name: Acme\n  zone: UTC\n  calendars:\n    holidays:\n{days}{empty}\
             \x20 rules:\n    Queue length: {{}}\n    Shelves: {{}}\n    Lights:\n      catch_up: {{policy: skip}}\n\
             \x20 branches:\n\
             \x20   - name: Olaya\n      hours:\n        mon-sun: [\"{interval}\"]\n      calendars: [holidays]\n\
             \x20     rules:\n        Queue length:\n          while_open: {{before: 30m, after: 15m}}\n        Shelves: {{}}\n\
             \x20   - name: Malqa\n      rules:\n{malqa_rule}",
            empty = if days.is_empty() { "      []\n" } else { "" },
            interval = self.interval,
        )
        .replace("    holidays:\n      []\n", "    holidays: []\n")
    }

    async fn apply(&self, document: &str) -> Value {
        let reply = self
            .app
            .call(
                ConfigApplyRequest::NAME,
                &self.admin,
                json!({"document": document}),
            )
            .await;
        assert_eq!(reply.status, 200, "{}\n{document}", reply.body);
        reply.body
    }

    async fn rule(&self, branch: &str, rule: &str) -> Uuid {
        sqlx::query_scalar(
            "SELECT x.id FROM branch_rules x JOIN branches b ON b.id = x.branch_id \
             JOIN rules r ON r.id = x.rule_id WHERE b.name = $1 AND r.name = $2",
        )
        .bind(branch)
        .bind(rule)
        .fetch_one(&self.app.pool)
        .await
        .expect("the branch rule")
    }

    async fn branch(&self, name: &str) -> Uuid {
        sqlx::query_scalar("SELECT id FROM branches WHERE name = $1")
            .bind(name)
            .fetch_one(&self.app.pool)
            .await
            .expect("the branch")
    }

    /// Olaya's hours as res-shared reads them from what the functions stored.
    async fn olaya_hours(&self) -> Arc<OpeningHours> {
        let stored: Value =
            sqlx::query_scalar("SELECT opening_hours FROM branches WHERE name = 'Olaya'")
                .fetch_one(&self.app.pool)
                .await
                .expect("resolved hours");
        let spec = serde_json::from_value(stored).expect("a spec");
        OpeningHours::from_stored(Some(&spec)).expect("hours")
    }

    /// A claim of `rule` by `site-1`, answered as it is (granted or refused).
    async fn claim(&self, runner: &str, rule: Uuid) -> res_tests::functions::Reply {
        self.app
            .call(
                ClaimRequest::NAME,
                runner,
                json!({"branch_rule_id": rule, "runner_id": "site-1"}),
            )
            .await
    }

    async fn due_now(&self, rule: Uuid, ago: TimeDelta) {
        sqlx::query("UPDATE branch_rules SET next_run_time = now() - $2 WHERE id = $1")
            .bind(rule)
            .bind(ago)
            .execute(&self.app.pool)
            .await
            .expect("due");
    }
}

fn while_open(hours: Arc<OpeningHours>) -> Timetable {
    Timetable::new(
        Some(Restriction::Hours {
            hours,
            before: 1800,
            after: 900,
        }),
        Validity::default(),
    )
    .expect("a timetable")
}

#[tokio::test]
async fn a_branch_closed_by_its_calendar_is_closed_on_every_path_and_open_again_when_it_is_not() {
    let b = brand().await;
    let yesterday = b.today - Days::new(1);
    let malqa_plain = "        Lights: {}\n";
    let applied = b
        .apply(&b.document(Some((yesterday, b.today)), malqa_plain))
        .await;
    assert_eq!(applied["applied"], true, "{applied}");

    // Stored as resolved: the calendar's range with its name and calendar.
    let hours = b.olaya_hours().await;
    let day = hours.day(b.today);
    assert!(
        matches!(day, res_shared::schedule::Day::Special(d) if d.intervals.is_empty()
            && d.name.as_deref() == Some("Test Day") && d.calendar.as_deref() == Some("holidays")),
        "{day:?}"
    );

    // Claim: closed, and the next opening is what res-shared says.
    let queue = b.rule("Olaya", "Queue length").await;
    b.due_now(queue, TimeDelta::minutes(1)).await;
    let runner = b
        .app
        .runner_token(&[b.branch("Olaya").await, b.branch("Malqa").await])
        .await;
    let refused = b.claim(&runner, queue).await;
    assert_eq!(refused.body["claimed"], false, "{}", refused.body);
    let now = b.app.db_now().await;
    let expected = while_open(hours.clone()).locate(now, Zone::parse("UTC").expect("utc"));
    let Some(WindowPosition::Outside { next_start }) = expected else {
        panic!("res-shared says it is open: {expected:?}");
    };
    let blockers = refused.body["blockers"].to_string();
    assert!(
        blockers.contains("outside_window")
            && blockers.contains(&next_start.format("%Y-%m-%dT%H:%M").to_string()),
        "{blockers} / {next_start}"
    );

    // Describe says why in words.
    let described = b
        .app
        .call(
            DescribeRuleRequest::NAME,
            &b.admin,
            json!({"branch_rule_id": queue}),
        )
        .await;
    assert_eq!(described.status, 200, "{}", described.body);
    let today = described.body["today"].as_str().unwrap_or_default();
    assert!(
        today.starts_with("closed today: Test Day; next opens"),
        "{today}"
    );
    assert!(
        described.body["schedule"]
            .as_str()
            .is_some_and(|s| s.contains(
                "while the branch is open (from 30 min before opening to 15 min after closing)"
            )),
        "{}",
        described.body
    );
    assert!(
        described.body["special_days"]
            .to_string()
            .contains("Test Day: closed"),
        "{}",
        described.body
    );
    // Another brand's admin asks: as for an unknown rule.
    let hidden = b
        .app
        .call(
            DescribeRuleRequest::NAME,
            &b.other_admin,
            json!({"branch_rule_id": queue}),
        )
        .await;
    let unknown = b
        .app
        .call(
            DescribeRuleRequest::NAME,
            &b.other_admin,
            json!({"branch_rule_id": Uuid::new_v4()}),
        )
        .await;
    assert_eq!(hidden.status, unknown.status);
    assert!(!hidden.body.to_string().contains("Test Day"));

    // The calendar emptied: open again, claimed, with the span's end as its deadline.
    b.apply(&b.document(None, malqa_plain)).await;
    b.due_now(queue, TimeDelta::minutes(1)).await;
    let claimed = b.claim(&runner, queue).await;
    assert_eq!(claimed.status, 200, "{}", claimed.body);
    let now = b.app.db_now().await;
    let Some(WindowPosition::Inside { end }) =
        while_open(b.olaya_hours().await).locate(now, Zone::parse("UTC").expect("utc"))
    else {
        panic!("res-shared says it is closed");
    };
    let deadline: DateTime<Utc> =
        serde_json::from_value(claimed.body["deadline"].clone()).expect("a deadline");
    assert_eq!(deadline, end);
    assert!(end - now > TimeDelta::minutes(60) && end - now <= TimeDelta::minutes(195));

    // The report: the next run is the one res-shared computes from the same hours.
    let reported = b
        .app
        .call(
            SetNextRunTimeRequest::NAME,
            &runner,
            json!({"branch_rule_id": queue, "is_last_run_failed": false,
                   "execution_id": claimed.body["execution_id"],
                   "claim_token": claimed.body["claim_token"]}),
        )
        .await;
    assert_eq!(reported.status, 200, "{}", reported.body);
    let at = |field: &str| -> DateTime<Utc> {
        serde_json::from_value(reported.body[field].clone()).expect("a time")
    };
    let expected = Schedule::in_timetable(
        Recurrence::parse("*/15 * * * *").expect("cron"),
        Some(while_open(b.olaya_hours().await)),
        None,
        Zone::parse("UTC").expect("utc"),
    )
    .expect("a schedule")
    .next_run(at("last_run_time"), false)
    .expect("a next run");
    assert_eq!(at("next_run_time"), expected.next_run_time);

    // Export gives back what was applied: applying it changes nothing.
    let export = b
        .app
        .call(
            ConfigExportRequest::NAME,
            &b.admin,
            json!({"brand_id": b.brand}),
        )
        .await;
    assert_eq!(export.status, 200, "{}", export.body);
    let document: res_config::Document =
        serde_json::from_value(export.body["document"].clone()).expect("a document");
    let text = res_config::to_yaml(&document, "exported").expect("yaml");
    assert!(
        text.contains("while_open") && text.contains("mon-sun") && text.contains("before: 30m"),
        "{text}"
    );
    let replay = b
        .app
        .call(
            ConfigApplyRequest::NAME,
            &b.admin,
            json!({"document": text}),
        )
        .await;
    assert_eq!(replay.body["applied"], false, "{}", replay.body);
}

#[tokio::test]
async fn a_runner_of_an_older_plan_format_is_never_sent_a_rule_that_needs_hours() {
    let b = brand().await;
    b.apply(&b.document(None, "        Lights: {}\n")).await;
    let runner = b
        .app
        .runner_token(&[b.branch("Olaya").await, b.branch("Malqa").await])
        .await;
    let plan = |format: u32, since: Option<String>| {
        let mut body = json!({"runner_id": "site-1", "format": format});
        if let Some(since) = since {
            body["since"] = json!(since);
        }
        (runner.clone(), body)
    };
    let queue = b.rule("Olaya", "Queue length").await;
    let shelves = b.rule("Olaya", "Shelves").await;
    let lights = b.rule("Malqa", "Lights").await;

    // Format 4 carries hours and timing; every rule is there.
    let (token, body) = plan(4, None);
    let new = b.app.call(PlanRequest::NAME, &token, body).await;
    assert_eq!(new.status, 200, "{}", new.body);
    let text = new.body.to_string();
    for id in [queue, shelves, lights] {
        assert!(text.contains(&id.to_string()), "{id} in {text}");
    }
    assert!(
        text.contains("\"while_open\"") && text.contains("\"hours\""),
        "{text}"
    );
    // The calendar once, with the brand; the branch names it.
    assert_eq!(text.matches("\"holidays\"").count(), 2, "{text}");

    // Formats 1 to 3: the rules that need hours are left out, and nothing of hours is sent.
    for format in [1, 2, 3] {
        let (token, body) = plan(format, None);
        let old = b.app.call(PlanRequest::NAME, &token, body).await;
        assert_eq!(old.status, 200, "{}", old.body);
        let text = old.body.to_string();
        assert!(
            text.contains(&lights.to_string()),
            "format {format}: {text}"
        );
        for id in [queue, shelves] {
            assert!(!text.contains(&id.to_string()), "format {format} sent {id}");
        }
        for key in ["\"hours\"", "\"timing\"", "while_open", "catch_up"] {
            assert!(!text.contains(key), "format {format} sent {key}: {text}");
        }
    }

    // Lights comes to need hours: an older runner's delta names it removed.
    let (token, body) = plan(3, None);
    let cursor = b.app.call(PlanRequest::NAME, &token, body).await.body["cursor"]
        .as_str()
        .expect("a cursor")
        .to_owned();
    b.apply(&b.document(
        None,
        "        Lights:\n          valid_from: \"2026-01-01\"\n",
    ))
    .await;
    let (token, body) = plan(3, Some(cursor));
    let delta = b.app.call(PlanRequest::NAME, &token, body).await;
    assert_eq!(delta.status, 200, "{}", delta.body);
    assert!(
        delta.body["removed"]
            .to_string()
            .contains(&lights.to_string()),
        "{}",
        delta.body
    );
    assert!(
        !delta.body["workflows"]
            .to_string()
            .contains(&lights.to_string())
    );
}

#[tokio::test]
async fn a_missed_run_is_skipped_or_made_once_as_its_catch_up_says() {
    let b = brand().await;
    b.apply(&b.document(None, "        Lights: {}\n")).await;
    let runner = b.app.runner_token(&[b.branch("Malqa").await]).await;
    let lights = b.rule("Malqa", "Lights").await;
    // Skip (the brand rule's): due three hours ago, the claim moves it to its next hour.
    b.due_now(lights, TimeDelta::hours(3)).await;
    let skipped = b.claim(&runner, lights).await;
    assert_eq!(skipped.body["claimed"], false, "{}", skipped.body);
    let now = b.app.db_now().await;
    let next: DateTime<Utc> =
        sqlx::query_scalar("SELECT next_run_time FROM branch_rules WHERE id = $1")
            .bind(lights)
            .fetch_one(&b.app.pool)
            .await
            .expect("moved");
    assert!(next > now && next <= now + TimeDelta::hours(1), "{next}");
    assert_eq!(next.minute(), 0);
    assert!(skipped.body["blockers"].to_string().contains("not_due"));
    let executions: i64 = sqlx::query_scalar("SELECT count(*) FROM executions")
        .fetch_one(&b.app.pool)
        .await
        .expect("count");
    assert_eq!(executions, 0, "no run was made");

    // Once (the branch rule's own, over the brand rule's skip) within its age: one run.
    b.apply(&b.document(
        None,
        "        Lights:\n          catch_up: {policy: once, max_age: 2h}\n",
    ))
    .await;
    b.due_now(lights, TimeDelta::minutes(90)).await;
    let made = b.claim(&runner, lights).await;
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(made.body["claimed"], true);
}

#[tokio::test]
async fn bad_hours_are_refused_at_their_paths_and_nothing_is_written() {
    let b = brand().await;
    let before = b.app.fingerprint().await;
    let document = b
        .document(None, "        Shelves: {}\n")
        .replace(
            &format!("[\"{}\"]", b.interval),
            "[\"09:00-12:00\", \"11:00-13:00\"]",
        )
        .replace("calendars: [holidays]", "calendars: [holidays, ramadan]")
        .replace("before: 30m", "before: 13h");
    let reply = b
        .app
        .call(
            ConfigApplyRequest::NAME,
            &b.admin,
            json!({"document": document}),
        )
        .await;
    assert_eq!(reply.status, 422, "{}", reply.body);
    let problems: Vec<(String, String)> = reply.body["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .map(|p| {
            let text = |k: &str| p[k].as_str().unwrap_or_default().to_owned();
            (text("path"), text("message"))
        })
        .collect();
    for (path, message) in [
        (
            "brand.branches[0].hours.mon-sun",
            "09:00-12:00 overlaps 11:00-13:00",
        ),
        (
            "brand.branches[0].calendars[1]",
            "no calendar called 'ramadan'",
        ),
        (
            "brand.branches[0].rules[\"Queue length\"].while_open.before",
            "'13h' is more than 12h",
        ),
        (
            "brand.branches[1].rules[\"Shelves\"]",
            "but its branch has no opening hours",
        ),
    ] {
        assert!(
            problems
                .iter()
                .any(|(p, m)| p == path && m.contains(message)),
            "{path}: {message} missing from {problems:?}"
        );
    }
    assert_eq!(
        problems.len(),
        4,
        "one problem each, no echoes: {problems:?}"
    );
    assert_eq!(b.app.fingerprint().await, before, "nothing written");
    let hours: Option<Value> = sqlx::query_scalar("SELECT hours FROM brands WHERE id = $1")
        .bind(b.brand)
        .fetch_one(&b.app.pool)
        .await
        .expect("the brand");
    assert_eq!(hours, None);
}

#[tokio::test]
async fn a_rule_whose_hours_never_meet_its_schedule_is_warned_at_apply_and_flagged_by_the_sweeper()
{
    let b = brand().await;
    // Lights at 10:00 on Mondays, its own week open Fridays only.
    let document = b
        .document(
            None,
            "        Lights:\n          week: {fri: [\"10:00-11:00\"]}\n",
        )
        .replace(
            "    Lights:\n      catch_up: {policy: skip}\n",
            "    Lights:\n      schedule: \"0 10 * * 1\"\n",
        );
    let applied = b.apply(&document).await;
    assert!(
        applied["warnings"]
            .to_string()
            .contains("never runs on an open day in the next year"),
        "{applied}"
    );
    let lights = b.rule("Malqa", "Lights").await;
    b.due_now(lights, TimeDelta::hours(2)).await;
    res_functions::sweeper::Sweeper::new(res_functions::sweeper::SweepSettings::default())
        .sweep_once(&b.app.pool, &res_functions::metrics::Metrics::default())
        .await
        .expect("a sweep")
        .expect("the only sweeper");
    let flagged: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM branch_rules WHERE needs_attention_at IS NOT NULL")
            .fetch_all(&b.app.pool)
            .await
            .expect("flagged");
    assert_eq!(flagged, vec![lights], "only the rule that never runs");
}

#[tokio::test]
async fn a_calendar_edit_sends_a_delta_to_the_brands_runners_and_nothing_to_another_brands() {
    let b = brand().await;
    b.apply(&b.document(None, "        Lights: {}\n")).await;
    let acme = b
        .app
        .runner_token(&[b.branch("Olaya").await, b.branch("Malqa").await])
        .await;
    let elsewhere: Uuid = sqlx::query_scalar(
        "INSERT INTO branches (brand_id, name) SELECT id, 'Elsewhere' FROM brands \
         WHERE name = 'Other' RETURNING id",
    )
    .fetch_one(&b.app.pool)
    .await
    .expect("a branch of another brand");
    let other = b.app.runner_token(&[elsewhere]).await;
    let plan = |token: &String, since: Option<&str>| {
        let mut body = json!({"runner_id": "site-1", "format": 4});
        if let Some(since) = since {
            body["since"] = json!(since);
        }
        let token = token.clone();
        let app = &b.app;
        async move { app.call(PlanRequest::NAME, &token, body).await }
    };
    let cursor = |reply: &res_tests::functions::Reply| {
        reply.body["cursor"].as_str().expect("a cursor").to_owned()
    };
    let acme_cursor = cursor(&plan(&acme, None).await);
    let other_cursor = cursor(&plan(&other, None).await);

    let from = b.today + Days::new(3);
    b.apply(&b.document(Some((from, from)), "        Lights: {}\n"))
        .await;

    let delta = plan(&acme, Some(&acme_cursor)).await;
    assert_eq!(delta.status, 200, "{}", delta.body);
    assert_eq!(
        delta.body["full"], false,
        "a delta, not a full plan: {}",
        delta.body
    );
    let text = delta.body.to_string();
    assert!(
        text.contains("Test Day"),
        "the new calendar travels: {text}"
    );
    let lights = b.rule("Malqa", "Lights").await;
    assert!(
        text.contains(&lights.to_string()),
        "a branch without the calendar is sent its brand's change too: {text}"
    );
    let untouched = plan(&other, Some(&other_cursor)).await;
    assert_eq!(untouched.status, 200, "{}", untouched.body);
    assert_eq!(untouched.body["full"], false, "{}", untouched.body);
    assert_eq!(
        untouched.body["tables"]["entries"]["id"]
            .as_array()
            .map(Vec::len),
        Some(0),
        "another brand's runner is sent nothing: {}",
        untouched.body
    );
}
