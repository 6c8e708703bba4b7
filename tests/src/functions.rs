//! A running functions service on a fresh database, real HTTP clients, and seed data.

use res_shared::wire::{Call, ClaimRequest};
use std::time::Duration;

use crate::postgres::{TestDatabase, server};
use chrono::{DateTime, TimeDelta, Timelike, Utc};
use res_functions::auth::{Role, generate_token, hash_token};
use res_functions::db::api_keys::KeyScope;
use res_functions::router::metrics_router;
use res_functions::state::Settings;
use res_functions::{AppState, Function, db, router_with_console};
use serde_json::Value;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// A database with the functions' schema, migrated once per throwaway server, that each
/// test's database is copied from; none on a `DATABASE_URL` server, where nothing is left
/// behind and each test migrates its own.
async fn migrated_template() -> Option<&'static str> {
    static TEMPLATE: tokio::sync::OnceCell<Option<String>> = tokio::sync::OnceCell::const_new();
    TEMPLATE
        .get_or_init(|| async {
            if !server().is_throwaway() {
                return None;
            }
            let template = server().create_database().await;
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .connect(&template.url)
                .await
                .expect("connect to the template database");
            db::migrate(&pool).await.expect("migrations apply");
            // A template may have no connections while it is copied.
            pool.close().await;
            let name = template.name().to_owned();
            // Kept for the server's life (the throwaway server is removed at exit).
            std::mem::forget(template);
            Some(name)
        })
        .await
        .as_deref()
}

/// The functions served on a random local port, over a migrated database of their own.
pub struct TestApp {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// Direct access to the database, for setup and for checking what changed.
    pub pool: PgPool,
    /// An HTTP client.
    pub client: reqwest::Client,
    /// A service token.
    pub service: String,
    /// The database (dropped with the app).
    pub database: TestDatabase,
    /// `http://127.0.0.1:<port>/metrics` of the same process's metrics.
    pub metrics_url: String,
}

/// A granted claim.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The branch rule.
    pub rule: Uuid,
    /// The execution it created.
    pub execution: Uuid,
    /// Its claim token.
    pub token: String,
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Body as JSON (`Null` if it was not JSON).
    pub body: Value,
    /// Response headers.
    pub headers: reqwest::header::HeaderMap,
}

impl TestApp {
    /// A migrated database and a server for it, looking every key up on every request.
    pub async fn start() -> TestApp {
        // The alert tests' webhook receivers listen on 127.0.0.1.
        let settings = Settings {
            notify_private_targets: true,
            ..Settings::default()
        };
        TestApp::start_with(settings, false).await
    }

    /// A migrated database and a server with `settings`; with `listening`, the server
    /// listens for key changes as `res-functions serve` does.
    pub async fn start_with(settings: Settings, listening: bool) -> TestApp {
        let database = server()
            .create_database_from(migrated_template().await)
            .await;
        let pool = PgPoolOptions::new()
            .max_connections(20)
            .acquire_timeout(Duration::from_secs(10))
            .connect(&database.url)
            .await
            .expect("connect to the test database");
        // Applies nothing on a copy of the template; migrates a `DATABASE_URL` database.
        db::migrate(&pool).await.expect("migrations apply");
        let keyring = res_functions::secrets::Keyring::parse(crate::secrets_keys()).ok();
        let state = AppState::with_settings(pool.clone(), settings).with_keyring(keyring);
        if listening {
            // Ends with the test's runtime.
            tokio::spawn(res_functions::listener::run(
                state.clone(),
                CancellationToken::new(),
            ));
        }
        let metrics_url = format!("{}/metrics", serve(metrics_router(state.clone())).await);
        let base = serve(router_with_console(state, &Function::ALL)).await;
        let service = generate_token();
        db::api_keys::insert(
            &pool,
            "test service",
            &hash_token(&service),
            Role::Service,
            &KeyScope::default(),
        )
        .await
        .expect("service key");
        TestApp {
            base,
            pool,
            client: client(),
            service,
            database,
            metrics_url,
        }
    }

    /// Waits until a server started `listening` listens for changes, then a moment more for
    /// it to trust what it hears.
    pub async fn wait_until_listening(&self) {
        let started = std::time::Instant::now();
        loop {
            let listens: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT FROM pg_stat_activity \
                                WHERE datname = current_database() AND query LIKE 'LISTEN %')",
            )
            .fetch_one(&self.pool)
            .await
            .expect("activity");
            if listens {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the server never listened for changes"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    /// A runner token scoped to `branches`.
    pub async fn runner_token(&self, branches: &[Uuid]) -> String {
        let scope = KeyScope {
            branch_ids: branches.to_vec(),
            ..KeyScope::default()
        };
        self.token("test runner", Role::Runner, &scope).await
    }

    /// A token of `role` over the whole of `brand`, named `name`.
    pub async fn brand_token(&self, name: &str, role: Role, brand: Uuid) -> String {
        let scope = KeyScope {
            brand_ids: vec![brand],
            ..KeyScope::default()
        };
        self.token(name, role, &scope).await
    }

    /// A token of `role` over every brand (a platform key), named `name`.
    pub async fn all_brands_token(&self, name: &str, role: Role) -> String {
        let scope = KeyScope {
            all_brands: true,
            ..KeyScope::default()
        };
        self.token(name, role, &scope).await
    }

    /// A token of any role and scope, named `name` (the "who" of operator actions).
    pub async fn token(&self, name: &str, role: Role, scope: &KeyScope) -> String {
        let token = generate_token();
        db::api_keys::insert(&self.pool, name, &hash_token(&token), role, scope)
            .await
            .expect("an API key");
        token
    }

    /// `POST /functions/v1/<function>` with a JSON body.
    pub async fn call(&self, function: &str, token: &str, body: Value) -> Reply {
        let request = self
            .client
            .post(format!("{}/functions/v1/{function}", self.base))
            .bearer_auth(token)
            .json(&body);
        reply(request).await
    }

    /// `POST` of raw bytes, for malformed input.
    pub async fn call_raw(&self, function: &str, token: Option<&str>, body: Vec<u8>) -> Reply {
        let mut request = self
            .client
            .post(format!("{}/functions/v1/{function}", self.base))
            .header("content-type", "application/json")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        reply(request).await
    }

    /// Runs one statement whose parameters are all ids (test setup and tampering).
    pub async fn exec(&self, statement: &'static str, ids: &[Uuid]) {
        let mut query = sqlx::query(statement);
        for id in ids {
            query = query.bind(*id);
        }
        query.execute(&self.pool).await.expect(statement);
    }

    /// Claims `rule` as `runner_id` with `token`; panics unless granted.
    pub async fn claim(&self, token: &str, rule: Uuid, runner_id: &str) -> Claim {
        let reply = self
            .call(
                ClaimRequest::NAME,
                token,
                serde_json::json!({"branch_rule_id": rule, "runner_id": runner_id}),
            )
            .await;
        assert_eq!(reply.status, 200, "claim of {rule}: {}", reply.body);
        let id = |field: &str| {
            reply.body[field]
                .as_str()
                .unwrap_or_else(|| panic!("claim answer without {field}: {}", reply.body))
                .to_owned()
        };
        Claim {
            rule,
            execution: id("execution_id").parse().expect("a uuid"),
            token: id("claim_token"),
        }
    }

    /// A digest of every row a function can write (rules, executions, violations, plan
    /// changes, operator actions, secrets), to prove that a refused call changed nothing. Like a
    /// key's last use, the runner registry is left out: a plan read records the runner.
    pub async fn fingerprint(&self) -> String {
        sqlx::query_scalar(
            "SELECT md5(concat_ws('|', \
                (SELECT string_agg(t::text, ',' ORDER BY t.id) FROM branch_rules t), \
                (SELECT string_agg(t::text, ',' ORDER BY t.id) FROM executions t), \
                (SELECT string_agg(t::text, ',' ORDER BY t.id) FROM violations t), \
                (SELECT count(*)::text FROM plan_changes), \
                (SELECT count(*)::text FROM operator_actions), \
                (SELECT count(*)::text FROM execution_output), \
                (SELECT string_agg(t::text, ',' ORDER BY t.id) FROM notification_channels t), \
                (SELECT count(*)::text FROM notification_outbox), \
                (SELECT string_agg(t::text, ',' ORDER BY t.brand_id, t.name) FROM secrets t), \
                (SELECT count(*)::text FROM secret_changes)))",
        )
        .fetch_one(&self.pool)
        .await
        .expect("fingerprint")
    }

    /// The metrics text of this app's process.
    pub async fn metrics(&self) -> String {
        self.client
            .get(&self.metrics_url)
            .send()
            .await
            .expect("metrics answer")
            .text()
            .await
            .expect("metrics text")
    }

    /// The sample `name` (with its labels, as exported) of this app's metrics.
    pub async fn metric(&self, name: &str) -> f64 {
        let metrics = self.metrics().await;
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no sample {name} in {metrics}"))
    }

    /// How many groups of `kind` (`claim`, `report`) were made, and of how many calls in
    /// all (`res_functions_group_size`).
    pub async fn groups_made(&self, kind: &str) -> (f64, f64) {
        let groups = self
            .metric(&format!(
                "res_functions_group_size_count{{kind=\"{kind}\"}}"
            ))
            .await;
        let calls = self
            .metric(&format!("res_functions_group_size_sum{{kind=\"{kind}\"}}"))
            .await;
        (groups, calls)
    }

    /// The database's clock.
    pub async fn db_now(&self) -> DateTime<Utc> {
        sqlx::query_scalar("SELECT now()")
            .fetch_one(&self.pool)
            .await
            .expect("now()")
    }
}

/// Serves `app` on a random local port for the rest of the test; returns
/// `http://127.0.0.1:<port>`.
pub async fn serve(app: axum::Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a port");
    let base = format!("http://{}", listener.local_addr().expect("local address"));
    tokio::spawn(async move {
        let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
        let _ = axum::serve(listener, app).await;
    });
    base
}

/// Installs the TLS provider. reqwest is built without a default one (the runner picks
/// ring), so one must be installed before any client is made.
pub fn install_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A plain HTTP client.
pub fn client() -> reqwest::Client {
    install_tls();
    reqwest::Client::new()
}

async fn reply(request: reqwest::RequestBuilder) -> Reply {
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("a body");
    Reply {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        headers,
    }
}

/// Seed data: brands, branches, rules and branch rules, with sensible defaults.
pub struct Seed<'a> {
    pool: &'a PgPool,
}

/// A branch rule to create.
pub struct RuleSpec<'a> {
    /// The rule's cron expression.
    pub cron: Option<&'a str>,
    /// Operation window, `HH:MM` or `HH:MM:SS`.
    pub window: Option<(&'a str, &'a str)>,
    /// Due time; `None` = never scheduled (due).
    pub next_run_time: Option<DateTime<Utc>>,
    /// Rule status.
    pub status: &'a str,
}

impl Default for RuleSpec<'_> {
    fn default() -> Self {
        RuleSpec {
            cron: Some("*/30 * * * *"),
            window: None,
            next_run_time: None,
            status: "active",
        }
    }
}

impl<'a> Seed<'a> {
    /// Seeds into `pool`.
    pub fn new(pool: &'a PgPool) -> Seed<'a> {
        Seed { pool }
    }

    /// A brand in `timezone`.
    pub async fn brand(&self, timezone: &str) -> Uuid {
        sqlx::query_scalar("INSERT INTO brands (name, timezone) VALUES ('Brand', $1) RETURNING id")
            .bind(timezone)
            .fetch_one(self.pool)
            .await
            .expect("brand")
    }

    /// Names the rule behind a branch rule (seeded rules are all called "Queue").
    pub async fn name_rule(&self, branch_rule: Uuid, name: &str) {
        sqlx::query(
            "UPDATE rules SET name = $2 WHERE id = (SELECT rule_id FROM branch_rules WHERE id = $1)",
        )
        .bind(branch_rule)
        .bind(name)
        .execute(self.pool)
        .await
        .expect("rule name");
    }

    /// A branch of `brand`, optionally overriding its zone.
    pub async fn branch(&self, brand: Uuid, timezone: Option<&str>) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO branches (brand_id, name, timezone) VALUES ($1, 'Branch', $2) RETURNING id",
        )
        .bind(brand)
        .bind(timezone)
        .fetch_one(self.pool)
        .await
        .expect("branch")
    }

    /// A rule, its workflow config, and a branch rule for `branch`.
    pub async fn branch_rule(&self, branch: Uuid, spec: RuleSpec<'_>) -> Uuid {
        self.branch_rule_with(branch, spec, &serde_json::json!({"start_node": "detect"}))
            .await
    }

    /// [`Seed::branch_rule`] with `workflow` as its rule's workflow config, stored before
    /// the branch rule: a waiting runner may fetch the branch rule the moment it commits.
    pub async fn branch_rule_with(
        &self,
        branch: Uuid,
        spec: RuleSpec<'_>,
        workflow: &Value,
    ) -> Uuid {
        let rule: Uuid = sqlx::query_scalar(
            "INSERT INTO rules (name, status, cron_expression) VALUES ('Queue', $1, $2) RETURNING id",
        )
        .bind(spec.status)
        .bind(spec.cron)
        .fetch_one(self.pool)
        .await
        .expect("rule");
        sqlx::query(
            "INSERT INTO action_template_connections (rule_id, workflow_config) \
             VALUES ($1, $2)",
        )
        .bind(rule)
        .bind(workflow)
        .execute(self.pool)
        .await
        .expect("connection");
        // As text, so PostgreSQL reads it as it reads any stored window (`24:00` included).
        sqlx::query_scalar(
            "INSERT INTO branch_rules (branch_id, rule_id, next_run_time, operation_time_from, \
                                       operation_time_to) \
             VALUES ($1, $2, $3, $4::text::time, $5::text::time) RETURNING id",
        )
        .bind(branch)
        .bind(rule)
        .bind(spec.next_run_time)
        .bind(spec.window.map(|w| w.0))
        .bind(spec.window.map(|w| w.1))
        .fetch_one(self.pool)
        .await
        .expect("branch rule")
    }

    /// One rule at every branch of `branches` (the first as [`Seed::branch_rule`] makes
    /// it, the others copies of the same rule); the branch rules in `branches`' order.
    pub async fn rule_at(&self, branches: &[Uuid], spec: RuleSpec<'_>) -> Vec<Uuid> {
        let Some((first, rest)) = branches.split_first() else {
            return Vec::new();
        };
        let next_run_time = spec.next_run_time;
        let original = self.branch_rule(*first, spec).await;
        let mut all = vec![original];
        for branch in rest {
            let copy: Uuid = sqlx::query_scalar(
                "INSERT INTO branch_rules (branch_id, rule_id, next_run_time, operation_time_from, \
                                           operation_time_to) \
                 SELECT $2, rule_id, $3, operation_time_from, operation_time_to \
                 FROM branch_rules WHERE id = $1 RETURNING id",
            )
            .bind(original)
            .bind(branch)
            .bind(next_run_time)
            .fetch_one(self.pool)
            .await
            .expect("a copy of the branch rule");
            all.push(copy);
        }
        all
    }

    /// One rule, named `name`, failing at `count` new branches of `brand` ("Branch 01"…):
    /// each needs attention after 3 or 4 failures in a row, flagged a minute apart (the
    /// first branch earliest), with its own last error; not due for a day. Its branch rules.
    pub async fn failing_rule(&self, brand: Uuid, name: &str, count: usize) -> Vec<Uuid> {
        let mut branches = Vec::new();
        for n in 1..=count {
            let branch = self.branch(brand, None).await;
            sqlx::query("UPDATE branches SET name = $2 WHERE id = $1")
                .bind(branch)
                .bind(format!("Branch {n:02}"))
                .execute(self.pool)
                .await
                .expect("branch name");
            branches.push(branch);
        }
        let spec = RuleSpec {
            next_run_time: Some(Utc::now() + chrono::TimeDelta::days(1)),
            ..RuleSpec::default()
        };
        let rules = self.rule_at(&branches, spec).await;
        if let Some(first) = rules.first() {
            self.name_rule(*first, name).await;
        }
        sqlx::query(
            "UPDATE branch_rules br SET consecutive_failures = 3 + n.i % 2, \
                 needs_attention_at = now() - make_interval(mins => (100 - n.i)::int), \
                 needs_attention_reason = format('failed %s times in a row (last: camera %s offline)', \
                                                 3 + n.i % 2, n.i) \
             FROM unnest($1::uuid[]) WITH ORDINALITY AS n(id, i) WHERE br.id = n.id",
        )
        .bind(&rules)
        .execute(self.pool)
        .await
        .expect("failing");
        rules
    }

    /// A brand, a branch and one branch rule that is due now; returns `(branch, rule)`.
    pub async fn due_rule(&self, spec: RuleSpec<'_>) -> (Uuid, Uuid) {
        let branch = self.branch(self.brand("Asia/Riyadh").await, None).await;
        let spec = RuleSpec {
            next_run_time: Some(Utc::now() - chrono::TimeDelta::minutes(1)),
            ..spec
        };
        (branch, self.branch_rule(branch, spec).await)
    }

    /// A detection template and an action detail for `branch_rule`.
    pub async fn action_detail(&self, branch_rule: Uuid) -> (Uuid, Uuid) {
        let template: Uuid = sqlx::query_scalar(
            "INSERT INTO action_templates (name, kind, config) \
             VALUES ('Queue detector', 'detection', '{\"executor\": \"command\"}') RETURNING id",
        )
        .fetch_one(self.pool)
        .await
        .expect("template");
        let detail: Uuid = sqlx::query_scalar(
            "INSERT INTO action_details (branch_rule_id, action_template_id, config) \
             VALUES ($1, $2, '{\"camera_ids\": [\"cam-1\"]}') RETURNING id",
        )
        .bind(branch_rule)
        .bind(template)
        .fetch_one(self.pool)
        .await
        .expect("action detail");
        (template, detail)
    }

    /// An action template of `kind` (`detection` or `business`) with `config`.
    pub async fn template(&self, name: &str, kind: &str, config: &Value) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO action_templates (name, kind, config) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(name)
        .bind(kind)
        .bind(config)
        .fetch_one(self.pool)
        .await
        .expect("template")
    }

    /// A branch rule of `branch` whose workflow runs `script` (with `sh -c`) as a `command`
    /// detector, then records a violation when the result says `violations > 0`.
    pub async fn command_rule(&self, branch: Uuid, spec: RuleSpec<'_>, script: &str) -> Uuid {
        let detect = self
            .template(
                "Queue detector",
                "detection",
                &serde_json::json!({"executor": "command", "program": "sh", "args": ["-c", script]}),
            )
            .await;
        let violation = self
            .template(
                "Queue violation",
                "business",
                &serde_json::json!({"kind": "queue_too_long"}),
            )
            .await;
        // Complete before the branch rule exists: a runner waiting on the branch hears of it
        // at its commit and runs it if due.
        let workflow = serde_json::json!({
            "start_node": "detect",
            "nodes": {
                "detect": {"type": "detection", "action_template_id": detect},
                "violation": {"type": "business", "action": "create_violation", "action_template_id": violation}
            },
            "edges": [{"from": "detect", "to": "violation", "condition": "violations > 0"}]
        });
        self.branch_rule_with(branch, spec, &workflow).await
    }

    /// Replaces the workflow config of `branch_rule`'s rule.
    pub async fn workflow(&self, branch_rule: Uuid, config: &Value) {
        sqlx::query(
            "UPDATE action_template_connections SET workflow_config = $2 \
             WHERE rule_id = (SELECT rule_id FROM branch_rules WHERE id = $1)",
        )
        .bind(branch_rule)
        .bind(config)
        .execute(self.pool)
        .await
        .expect("workflow config");
    }
}

/// A branch rule's `(next_run_time, last_run_time, run_count, is_currently_running)`.
pub async fn rule_row(
    pool: &PgPool,
    rule: Uuid,
) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>, i64, bool) {
    sqlx::query_as(
        "SELECT next_run_time, last_run_time, run_count, is_currently_running \
         FROM branch_rules WHERE id = $1",
    )
    .bind(rule)
    .fetch_one(pool)
    .await
    .expect("rule row")
}

/// Replaces the script of every `command` detection template (see [`Seed::command_rule`]).
pub async fn set_detector(pool: &PgPool, script: &str) {
    sqlx::query(
        "UPDATE action_templates SET config = jsonb_set(config, '{args,1}', to_jsonb($1::text)) \
         WHERE kind = 'detection'",
    )
    .bind(script)
    .execute(pool)
    .await
    .expect("detector script");
}

/// An hourly cron (`M * * * *`) whose next time is about half an hour away, so a rule a test
/// runs now is not due again before the test ends whatever the time of day: a `0 * * * *`
/// rule run at 09:59:58 is due again at 10:00 (minutes are the same in UTC and in the
/// tests' whole-hour zones).
pub fn hourly_cron() -> String {
    format!("{} * * * *", (Utc::now().minute() + 30) % 60)
}

/// The next run the shared crate predicts for `cron` (Asia/Riyadh, no window) after `from`.
pub fn predicted_next_run(cron: &str, from: DateTime<Utc>) -> DateTime<Utc> {
    res_shared::schedule::Schedule::parse(cron, None, None, Some("Asia/Riyadh"))
        .expect("schedule")
        .next_run(from, false)
        .expect("next run")
        .next_run_time
}

/// A window `(from, to)` as `HH:00` open from an hour before `local_now` to two hours after,
/// so a rule is inside it whatever the time of day the tests run.
pub fn window_around(local_now: DateTime<Utc>) -> (String, String) {
    let from = (local_now - TimeDelta::hours(1))
        .format("%H:00")
        .to_string();
    let to = (local_now + TimeDelta::hours(2))
        .format("%H:00")
        .to_string();
    (from, to)
}
