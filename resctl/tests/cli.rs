//! `resctl` as a child process against real functions and PostgreSQL.

use std::process::{Command, Output};

use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_tests::functions::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

fn resctl(app_url: &str, token: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resctl"))
        .args(args)
        .env("RES_URL", app_url)
        .env("RES_TOKEN", token)
        .output()
        .expect("resctl runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A fresh app with one brand, one branch and one rule: (app, brand, rule).
async fn one_rule() -> (TestApp, Uuid, Uuid) {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let branch = seed.branch(brand, None).await;
    let rule = seed.branch_rule(branch, RuleSpec::default()).await;
    (app, brand, rule)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_runs_pauses_and_reads_a_rule_and_exit_codes_say_what_went_wrong() {
    let (app, brand, rule) = one_rule().await;
    let scope = KeyScope {
        brand_ids: vec![brand],
        ..KeyScope::default()
    };
    let operator = app.token("alice", Role::Operator, &scope).await;
    let viewer = app.token("victor", Role::Viewer, &scope).await;
    let id = rule.to_string();
    let url = app.base.clone();
    let (u, o) = (url.clone(), operator.clone());
    let run = move |args: Vec<String>| {
        let (u, o) = (u.clone(), o.clone());
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            resctl(&u, &o, &args)
        })
    };
    let args = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();

    let described = run(args(&["rules", "describe", &id]))
        .await
        .expect("joined");
    assert!(described.status.success(), "{}", text(&described));
    let out = text(&described);
    assert!(
        out.contains("state: idle")
            && out.contains("every 30 minutes")
            && out.contains("runs: none yet\nlast 24 h: no finished runs\n"),
        "{out}"
    );

    let asked = run(args(&["rules", "run-now", &id, "--reason", "complaint"]))
        .await
        .expect("joined");
    assert!(asked.status.success(), "{}", text(&asked));
    assert!(
        text(&asked).starts_with("run requested: "),
        "{}",
        text(&asked)
    );
    let twice = run(args(&["rules", "run-now", &id, "--reason", "again"]))
        .await
        .expect("joined");
    assert_eq!(twice.status.code(), Some(3), "refused: {}", text(&twice));
    assert!(text(&twice).contains("run_requested"), "{}", text(&twice));

    let unknown = Uuid::new_v4().to_string();
    let missing = run(args(&["rules", "pause", &unknown, "--reason", "x"]))
        .await
        .expect("joined");
    assert_eq!(missing.status.code(), Some(4), "{}", text(&missing));

    let listed = run(args(&["executions", "list", "--json"]))
        .await
        .expect("joined");
    assert!(listed.status.success(), "{}", text(&listed));
    let json: serde_json::Value =
        serde_json::from_slice(&listed.stdout).expect("--json prints JSON");
    assert!(json["executions"].is_array(), "{json}");

    let (u, v) = (url.clone(), viewer.clone());
    let read_only = tokio::task::spawn_blocking(move || {
        resctl(&u, &v, &["rules", "pause", &id, "--reason", "x"])
    })
    .await
    .expect("joined");
    assert_eq!(read_only.status.code(), Some(3), "{}", text(&read_only));
    let u = url.clone();
    let bad_token =
        tokio::task::spawn_blocking(move || resctl(&u, "res_not-a-key", &["executions", "list"]))
            .await
            .expect("joined");
    assert_eq!(bad_token.status.code(), Some(6), "{}", text(&bad_token));
    let nowhere = tokio::task::spawn_blocking(move || {
        resctl("http://127.0.0.1:9", &operator, &["executions", "list"])
    })
    .await
    .expect("joined");
    assert_eq!(nowhere.status.code(), Some(5), "{}", text(&nowhere));
    let paused: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT paused_at FROM branch_rules WHERE id = $1")
            .bind(rule)
            .fetch_one(&app.pool)
            .await
            .expect("the rule");
    assert_eq!(paused, None, "the viewer's pause changed nothing");
}

/// Runs resctl on a blocking thread with the given environment (no RES_URL/RES_TOKEN
/// unless given), so a config file can be tested too.
async fn resctl_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_resctl"))
            .args(&args)
            .env_remove("RES_URL")
            .env_remove("RES_TOKEN")
            .env("XDG_CONFIG_HOME", "/nonexistent")
            .envs(env)
            .output()
            .expect("resctl runs")
    })
    .await
    .expect("joined")
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_by_name_runners_violations_and_a_config_file() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let olaya = seed.branch(brand, None).await;
    let malaz = seed.branch(brand, None).await;
    let queue_olaya = seed.branch_rule(olaya, RuleSpec::default()).await;
    let queue_malaz = seed.branch_rule(malaz, RuleSpec::default()).await;
    for (branch, name) in [(olaya, "Olaya"), (malaz, "Malaz")] {
        sqlx::query("UPDATE branches SET name = $2 WHERE id = $1")
            .bind(branch)
            .bind(name)
            .execute(&app.pool)
            .await
            .expect("branch name");
    }
    sqlx::query("UPDATE rules SET name = 'Queue length'")
        .execute(&app.pool)
        .await
        .expect("rule names");
    let scope = KeyScope {
        brand_ids: vec![brand],
        ..KeyScope::default()
    };
    let operator = app.token("alice", Role::Operator, &scope).await;
    let runner = app.runner_token(&[olaya]).await;
    let registered = app
        .call(
            "runner_register",
            &runner,
            serde_json::json!({"runner_id": "olaya-host", "boot_id": "b1", "version": "9.9.9"}),
        )
        .await;
    assert_eq!(registered.status, 200, "{}", registered.body);

    // The token and URL from a config file.
    let dir = std::env::temp_dir().join(format!("resctl-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!("url = \"{}\"\ntoken = \"{operator}\"\n", app.base),
    )
    .expect("config written");
    let config = config.to_string_lossy().into_owned();
    let with_file = [("RESCTL_CONFIG", config.as_str())];

    let listed = resctl_env(&["rules", "list"], &with_file).await;
    assert!(listed.status.success(), "{}", text(&listed));
    let out = text(&listed);
    assert!(
        out.starts_with("RULE") && out.contains("Malaz") && out.contains("Olaya"),
        "{out}"
    );

    // A name in two branches is ambiguous; --branch by name settles it.
    let ambiguous = resctl_env(&["rules", "describe", "Queue length"], &with_file).await;
    assert_eq!(ambiguous.status.code(), Some(3), "{}", text(&ambiguous));
    assert!(
        text(&ambiguous).contains("pass --branch"),
        "{}",
        text(&ambiguous)
    );
    let paused = resctl_env(
        &[
            "rules",
            "pause",
            "queue length",
            "--branch",
            "olaya",
            "--reason",
            "camera moved",
        ],
        &with_file,
    )
    .await;
    assert!(paused.status.success(), "{}", text(&paused));
    let is_paused = |rule: Uuid| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, bool>(
                "SELECT paused_at IS NOT NULL FROM branch_rules WHERE id = $1",
            )
            .bind(rule)
            .fetch_one(&pool)
            .await
            .expect("the rule")
        }
    };
    assert!(is_paused(queue_olaya).await && !is_paused(queue_malaz).await);
    let unknown = resctl_env(
        &["rules", "describe", "No such rule", "--branch", "Olaya"],
        &with_file,
    )
    .await;
    assert_eq!(unknown.status.code(), Some(4), "{}", text(&unknown));

    let paused_only = resctl_env(
        &["rules", "list", "--state", "paused", "--json"],
        &with_file,
    )
    .await;
    let json: serde_json::Value =
        serde_json::from_slice(&paused_only.stdout).expect("--json prints JSON");
    assert_eq!(json["rules"].as_array().map(Vec::len), Some(1), "{json}");
    assert_eq!(json["rules"][0]["branch_name"], "Olaya");

    let runners = resctl_env(&["runners", "list"], &with_file).await;
    assert!(runners.status.success(), "{}", text(&runners));
    let out = text(&runners);
    assert!(
        out.contains("olaya-host") && out.contains("alive") && out.contains("9.9.9"),
        "{out}"
    );

    let violations = resctl_env(
        &[
            "violations",
            "list",
            "--branch",
            "Olaya",
            "--rule",
            "Queue length",
        ],
        &with_file,
    )
    .await;
    assert!(violations.status.success(), "{}", text(&violations));
    assert!(
        text(&violations).starts_with("CREATED"),
        "{}",
        text(&violations)
    );

    // A flag beats the file; an unknown key in the file is named.
    let flag = resctl_env(&["--token", "res_not-a-key", "rules", "list"], &with_file).await;
    assert_eq!(flag.status.code(), Some(6), "{}", text(&flag));
    let broken = dir.join("broken.toml");
    std::fs::write(&broken, "tokn = \"x\"\n").expect("written");
    let broken = broken.to_string_lossy().into_owned();
    let refused = resctl_env(&["rules", "list"], &[("RESCTL_CONFIG", broken.as_str())]).await;
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(text(&refused).contains("tokn"), "{}", text(&refused));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn input_the_functions_refuse_is_bad_usage_exit_2_and_changes_nothing() {
    let (app, brand, rule) = one_rule().await;
    let scope = KeyScope {
        brand_ids: vec![brand],
        ..KeyScope::default()
    };
    let operator = app.token("alice", Role::Operator, &scope).await;
    let before = app.fingerprint().await;
    let id = rule.to_string();
    let long_reason = "r".repeat(501);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["executions", "list", "--limit", "0"], "limit"),
        (vec!["executions", "list", "--after", "garbage"], "after"),
        (
            vec!["rules", "pause", &id, "--reason", &long_reason],
            "reason",
        ),
        (vec!["rules", "describe", &id, "--next", "50"], "next"),
        (
            vec![
                "executions",
                "list",
                "--since",
                "2026-01-02T00:00:00Z",
                "--until",
                "2026-01-01T00:00:00Z",
            ],
            "until",
        ),
        (vec!["rules", "frobnicate"], "frobnicate"),
    ];
    for (args, named) in cases {
        let (url, token) = (app.base.clone(), operator.clone());
        let owned: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let output = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = owned.iter().map(String::as_str).collect();
            resctl(&url, &token, &args)
        })
        .await
        .expect("joined");
        let shown = text(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {shown}");
        assert!(shown.contains(named), "{args:?} names {named}: {shown}");
    }
    assert_eq!(app.fingerprint().await, before, "nothing was done");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_brand_admin_creates_rotates_and_revokes_keys_and_sees_each_secret_once() {
    let (app, brand, _) = one_rule().await;
    let scope = KeyScope {
        brand_ids: vec![brand],
        ..KeyScope::default()
    };
    let admin = app.token("brand admin", Role::Admin, &scope).await;
    let run = |args: Vec<String>| {
        let (url, token) = (app.base.clone(), admin.clone());
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            resctl(&url, &token, &args)
        })
    };
    let brand_text = brand.to_string();
    let created = run([
        "keys",
        "create",
        "--name",
        "wall screen",
        "--role",
        "viewer",
        "--brand",
        &brand_text,
    ]
    .map(str::to_owned)
    .to_vec())
    .await
    .expect("joined");
    let out = text(&created);
    assert!(created.status.success(), "{out}");
    assert!(out.contains("only time the token is shown"), "{out}");
    let token = out
        .lines()
        .find_map(|line| line.strip_prefix("token: "))
        .expect("the token")
        .to_owned();
    let id = out
        .strip_prefix("created: ")
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the id")
        .to_owned();
    // The viewer key works; `keys list` never shows the secret.
    let (url, viewer) = (app.base.clone(), token.clone());
    let read = tokio::task::spawn_blocking(move || resctl(&url, &viewer, &["executions", "list"]))
        .await
        .expect("joined");
    assert!(read.status.success(), "{}", text(&read));
    let listed = run(["keys", "list"].map(str::to_owned).to_vec())
        .await
        .expect("joined");
    assert!(!text(&listed).contains(&token), "{}", text(&listed));
    assert!(text(&listed).contains("brand "), "{}", text(&listed));

    let rotated = run(["keys", "rotate", &id].map(str::to_owned).to_vec())
        .await
        .expect("joined");
    assert!(rotated.status.success(), "{}", text(&rotated));
    assert!(text(&rotated).starts_with("rotated: its successor: "));
    let revoked = run(["keys", "revoke", &id].map(str::to_owned).to_vec())
        .await
        .expect("joined");
    assert!(revoked.status.success(), "{}", text(&revoked));
    let again = run(["keys", "revoke", &id].map(str::to_owned).to_vec())
        .await
        .expect("joined");
    assert_eq!(again.status.code(), Some(3), "{}", text(&again));
    let unknown = Uuid::new_v4().to_string();
    let missing = run(["keys", "revoke", &unknown].map(str::to_owned).to_vec())
        .await
        .expect("joined");
    assert_eq!(missing.status.code(), Some(4), "{}", text(&missing));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_exports_its_brand_as_yaml_that_validates_and_the_catalogue_needs_a_platform_key()
{
    let (app, brand, _rule) = one_rule().await;
    let admin = app
        .token(
            "ada",
            Role::Admin,
            &KeyScope {
                brand_ids: vec![brand],
                ..KeyScope::default()
            },
        )
        .await;
    let platform = app.all_brands_token("platform", Role::Admin).await;
    let url = app.base.clone();
    let brand_id = brand.to_string();
    let (exported, catalogue, refused, json) = tokio::task::spawn_blocking(move || {
        (
            resctl(&url, &admin, &["export", "--brand", &brand_id]),
            resctl(&url, &platform, &["export", "--catalogue"]),
            resctl(&url, &admin, &["export", "--catalogue"]),
            resctl(&url, &admin, &["export", "--brand", &brand_id, "--json"]),
        )
    })
    .await
    .expect("joined");
    assert_eq!(exported.status.code(), Some(0), "{}", text(&exported));
    let yaml = String::from_utf8_lossy(&exported.stdout).into_owned();
    assert!(
        yaml.starts_with("# RES configuration at revision 0, exported "),
        "{yaml}"
    );
    let document = res_config::parse(&yaml).expect("the export reads as a document");
    let brand_doc = document.brand.expect("a brand");
    assert_eq!(brand_doc.id, Some(brand));
    assert_eq!(brand_doc.branches.len(), 1);
    assert_eq!(document.base_revision, Some(0));

    assert_eq!(catalogue.status.code(), Some(0), "{}", text(&catalogue));
    let dir = std::env::temp_dir().join(format!("resctl-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let (brand_file, catalogue_file) = (dir.join("brand.yaml"), dir.join("catalogue.yaml"));
    std::fs::write(&brand_file, &yaml).expect("write");
    std::fs::write(&catalogue_file, &catalogue.stdout).expect("write");
    let checked = Command::new(env!("CARGO_BIN_EXE_resctl"))
        .args(["config", "validate", "-f"])
        .arg(&brand_file)
        .arg("--catalogue")
        .arg(&catalogue_file)
        .output()
        .expect("resctl runs");
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    let _ = std::fs::remove_dir_all(&dir);

    // 403: refused (exit 3), nothing printed on stdout.
    assert_eq!(refused.status.code(), Some(3), "{}", text(&refused));
    assert!(refused.stdout.is_empty());
    let answer: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(answer["revision"], 0);
    assert_eq!(answer["document"]["brand"]["id"], brand.to_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_sees_the_diff_then_applies_an_edited_export_and_a_broken_one_lists_every_problem()
{
    let (app, brand, _rule) = one_rule().await;
    let admin = app
        .token(
            "ada",
            Role::Admin,
            &KeyScope {
                brand_ids: vec![brand],
                ..KeyScope::default()
            },
        )
        .await;
    let url = app.base.clone();
    let brand_id = brand.to_string();
    let dir = std::env::temp_dir().join(format!("resctl-apply-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let file = dir.join("brand.yaml");
    let broken = dir.join("broken.yaml");
    let f = file.clone();
    let b = broken.clone();
    let (u, a, id) = (app.base.clone(), admin.clone(), brand.to_string());
    let (diffed, applied, again, refused) = tokio::task::spawn_blocking(move || {
        let exported = resctl(&url, &admin, &["export", "--brand", &brand_id]);
        let yaml = String::from_utf8_lossy(&exported.stdout).into_owned();
        assert!(yaml.contains("zone: UTC"), "{yaml}");
        std::fs::write(&f, yaml.replace("zone: UTC", "zone: Asia/Riyadh")).expect("write");
        std::fs::write(
            &b,
            yaml.replace("zone: UTC", "zone: Asia/Riyad")
                .replace("name: Brand", "name: ''"),
        )
        .expect("write");
        let path = f.to_str().expect("utf-8 path").to_owned();
        (
            resctl(&url, &admin, &["diff", "-f", &path]),
            resctl(
                &url,
                &admin,
                &["apply", "-f", &path, "-m", "the brand is in Riyadh"],
            ),
            resctl(&url, &admin, &["diff", "-f", &path]),
            resctl(
                &url,
                &admin,
                &["apply", "-f", b.to_str().expect("utf-8 path")],
            ),
        )
    })
    .await
    .expect("joined");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(diffed.status.code(), Some(0), "{}", text(&diffed));
    let shown = String::from_utf8_lossy(&diffed.stdout).into_owned();
    assert!(
        shown.starts_with("~ brand 'Brand'\n    zone: UTC → Asia/Riyadh\n"),
        "{shown}"
    );
    assert!(
        shown.ends_with("Nothing was written (at revision 0): resctl apply -f FILE applies it.\n"),
        "{shown}"
    );
    assert_eq!(applied.status.code(), Some(0), "{}", text(&applied));
    assert!(
        text(&applied).ends_with("Applied as configuration revision 1.\n"),
        "{}",
        text(&applied)
    );
    let message: String = sqlx::query_scalar("SELECT message FROM config_revisions WHERE id = 1")
        .fetch_one(&app.pool)
        .await
        .expect("revision 1");
    assert_eq!(message, "the brand is in Riyadh");
    // The export carried base_revision 0; applied once, the same file is now stale only
    // where it changed nothing: the diff says nothing changes.
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(text(&again).starts_with("No changes"), "{}", text(&again));
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(
        stderr.contains("error: brand.name: must not be empty\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: brand.zone: unknown time zone 'Asia/Riyad'"),
        "{stderr}"
    );

    let (history, shown, document) = tokio::task::spawn_blocking(move || {
        (
            resctl(&u, &a, &["config", "history", "--brand", &id]),
            resctl(&u, &a, &["config", "show", "1"]),
            resctl(&u, &a, &["config", "show", "1", "--document"]),
        )
    })
    .await
    .expect("joined");
    assert_eq!(history.status.code(), Some(0), "{}", text(&history));
    let listed = String::from_utf8_lossy(&history.stdout).into_owned();
    assert!(listed.starts_with("REVISION"), "{listed}");
    assert!(
        listed.contains("ada")
            && listed.contains("+0 ~2 -0")
            && listed.contains("the brand is in Riyadh"),
        "{listed}"
    );
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(shown.starts_with("revision 1 applied "), "{shown}");
    assert!(
        shown.contains(
            "by ada: the brand is in Riyadh\n~ brand 'Brand'\n    zone: UTC → Asia/Riyadh\n"
        ),
        "{shown}"
    );
    let yaml = String::from_utf8_lossy(&document.stdout).into_owned();
    let old = res_config::parse(&yaml).expect("the revision's document reads as a document");
    assert_eq!(old.brand.map(|b| b.zone), Some("Asia/Riyadh".to_owned()));
}

/// `resctl fleet` as a child process: the totals, a rule failing at 15 branches on one line,
/// its branches with `--branches`, and another brand's answer as an unknown brand's.
#[tokio::test(flavor = "multi_thread")]
async fn fleet_prints_totals_and_a_rule_failing_at_fifteen_branches_as_one_line() {
    let (app, brand, _) = one_rule().await;
    let failing = Seed::new(&app.pool)
        .failing_rule(brand, "Camera check", 15)
        .await;
    let operator = app.brand_token("ops", Role::Operator, brand).await;
    let shown = resctl(&app.base, &operator, &["fleet"]);
    assert!(shown.status.success(), "{}", text(&shown));
    let out = text(&shown);
    assert!(
        out.starts_with(
            "rules: 1 idle, 15 needs attention (0 overdue) at 16 branches\nrunners: none\n\
             runner versions: none running\n"
        ),
        "{out}"
    );
    assert!(out.contains("needs you (1 group):\n"), "{out}");
    assert!(
        out.contains(
            "  Camera check at 15 branches of Brand: failed 3 to 4 times in a row, since 1 h ago\n"
        ),
        "{out}"
    );
    assert!(!out.contains("camera 15 offline"), "{out}");
    let listed = text(&resctl(&app.base, &operator, &["fleet", "--branches"]));
    assert!(
        listed.contains(&format!(
            "    {}  Branch 15  failed 4 times in a row (last: camera 15 offline)",
            failing[14]
        )),
        "{listed}"
    );
    // Acknowledged at one branch for 2 hours: that branch's item is listed apart, with who,
    // why and when it ends.
    let acked = resctl(
        &app.base,
        &operator,
        &[
            "rules",
            "acknowledge",
            &failing[0].to_string(),
            "--reason",
            "vendor on site",
            "--hours",
            "2",
        ],
    );
    assert!(acked.status.success(), "{}", text(&acked));
    assert!(
        text(&acked).contains("acknowledged by ops, ends in 1 h: vendor on site"),
        "{}",
        text(&acked)
    );
    let out = text(&resctl(&app.base, &operator, &["fleet"]));
    assert!(out.contains("needs you (2 groups):\n"), "{out}");
    assert!(
        out.ends_with(
            "  Camera check at Branch 01 of Brand: failed 4 times in a row, since 1 h ago\n    \
             acknowledged by ops, ends in 1 h: vendor on site\n"
        ),
        "{out}"
    );
    let too_long = resctl(
        &app.base,
        &operator,
        &[
            "rules",
            "acknowledge",
            &failing[1].to_string(),
            "--reason",
            "x",
            "--hours",
            "200",
        ],
    );
    assert_eq!(too_long.status.code(), Some(2), "{}", text(&too_long));
    assert!(text(&too_long).contains("until"), "{}", text(&too_long));

    let other = Seed::new(&app.pool).brand("UTC").await;
    let walled = resctl(
        &app.base,
        &operator,
        &["fleet", "--brand", &other.to_string()],
    );
    assert_eq!(walled.status.code(), Some(4), "{}", text(&walled));
    assert!(
        text(&walled).contains(&format!("brand {other} not found")),
        "{}",
        text(&walled)
    );
}

async fn paused_with(app: &TestApp, rules: &[Uuid], reason: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM branch_rules WHERE id = ANY($1) AND paused_at IS NOT NULL \
           AND pause_reason = $2",
    )
    .bind(rules)
    .bind(reason)
    .fetch_one(&app.pool)
    .await
    .expect("paused count")
}

/// A group action from the terminal: one command and one reason act at every branch of the
/// fleet's group, each refusal listed by branch (exit 3); a bad reason is refused once with
/// nothing done; another brand's rule of the same name is neither touched nor findable by id;
/// an all-brands key must say which brand's rule it means.
#[tokio::test(flavor = "multi_thread")]
async fn a_group_action_acts_at_every_branch_of_the_group_and_lists_each_refusal() {
    let (app, brand, _) = one_rule().await;
    let seed = Seed::new(&app.pool);
    let failing = seed.failing_rule(brand, "Camera check", 15).await;
    let other = seed.brand("UTC").await;
    let theirs = seed.failing_rule(other, "Camera check", 3).await;
    let operator = app.brand_token("ops", Role::Operator, brand).await;
    let run = |args: &[&str]| resctl(&app.base, &operator, args);

    // Two branches already have a run waiting: run-now is refused there and done elsewhere.
    sqlx::query("UPDATE branch_rules SET run_requested_at = now() WHERE id = ANY($1)")
        .bind(&failing[1..3])
        .execute(&app.pool)
        .await
        .expect("run requested");
    let asked = run(&[
        "rules",
        "run-now",
        "Camera check",
        "--group",
        "needs_attention",
        "--reason",
        "after the firmware",
    ]);
    let out = text(&asked);
    assert_eq!(asked.status.code(), Some(3), "{out}");
    assert!(
        out.starts_with(
            "run requested at 13 of 15 branches: Camera check of Brand (needs_attention)\n"
        ),
        "{out}"
    );
    for (n, id) in [(2, failing[1]), (3, failing[2])] {
        assert!(
            out.contains(&format!(
                "refused at Branch {n:02} ({id}): 409 run_requested: a run-now request of this \
                 rule is already waiting for a runner\n"
            )),
            "{out}"
        );
    }
    assert!(
        out.contains("error: 2 of the group's branches refused"),
        "{out}"
    );

    let their_rule: Uuid = sqlx::query_scalar("SELECT rule_id FROM branch_rules WHERE id = $1")
        .bind(theirs[0])
        .fetch_one(&app.pool)
        .await
        .expect("their rule");
    // An all-brands key sees two brands' "Camera check" and must give the rule id.
    let everyone = app.all_brands_token("root", Role::Operator).await;
    let ambiguous = resctl(
        &app.base,
        &everyone,
        &[
            "rules",
            "resume",
            "Camera check",
            "--group",
            "needs_attention",
            "--reason",
            "x",
        ],
    );
    assert_eq!(ambiguous.status.code(), Some(3), "{}", text(&ambiguous));
    assert!(
        text(&ambiguous).contains(&their_rule.to_string()),
        "{}",
        text(&ambiguous)
    );

    // A blank reason is refused once, naming the field, and nothing is paused.
    let blank = run(&[
        "rules",
        "pause",
        "Camera check",
        "--group",
        "needs_attention",
        "--reason",
        " ",
    ]);
    assert_eq!(blank.status.code(), Some(2), "{}", text(&blank));
    assert!(text(&blank).contains("reason"), "{}", text(&blank));
    let all: Vec<Uuid> = failing.iter().chain(&theirs).copied().collect();
    assert_eq!(paused_with(&app, &all, " ").await, 0);

    // Paused at all 15 with one reason, as JSON; the other brand's copies are untouched.
    let paused = run(&[
        "--json",
        "rules",
        "pause",
        "Camera check",
        "--group",
        "needs_attention",
        "--reason",
        "camera firmware",
    ]);
    assert!(paused.status.success(), "{}", text(&paused));
    let answer: serde_json::Value = serde_json::from_slice(&paused.stdout).expect("a JSON outcome");
    assert_eq!(
        answer["done"].as_array().map(Vec::len),
        Some(15),
        "{answer}"
    );
    assert_eq!(answer["refused"], serde_json::json!([]), "{answer}");
    assert_eq!(paused_with(&app, &failing, "camera firmware").await, 15);
    assert_eq!(paused_with(&app, &theirs, "camera firmware").await, 0);
    // Paused, the rule leaves the group: the brand's fleet has nothing left to show.
    let quiet = text(&run(&["fleet"]));
    assert!(
        quiet.contains("nothing needs attention and nothing is overdue"),
        "{quiet}"
    );

    // The other brand's rule by its id answers as a rule nobody has; an unknown kind and a
    // branch beside a group are usage errors.
    let unknown = Uuid::new_v4();
    let mut answers = Vec::new();
    for rule in [their_rule, unknown] {
        let id = rule.to_string();
        let refused = run(&[
            "rules",
            "resume",
            &id,
            "--group",
            "needs_attention",
            "--reason",
            "x",
        ]);
        assert_eq!(refused.status.code(), Some(4), "{}", text(&refused));
        answers.push(text(&refused).replace(&id, "ID"));
    }
    assert_eq!(answers[0], answers[1]);
    for bad in [
        ["--group", "late", "--reason", "x"],
        ["--group", "overdue", "--branch", "Branch 01"],
    ] {
        let mut args = vec!["rules", "pause", "Camera check"];
        args.extend(bad);
        args.extend(["--reason", "x"]);
        let refused = run(&args);
        assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    }
    assert_eq!(paused_with(&app, &theirs, "x").await, 0);
}

#[test]
fn a_secret_value_typed_on_the_command_line_is_refused_without_being_repeated() {
    let value = "Sup3r-s3cret-typed-value";
    let brand = Uuid::new_v4().to_string();
    for args in [
        vec!["secrets", "set", "cam-17", "--brand", &brand, value],
        vec!["secrets", "set", "cam-17", value, "--brand", &brand],
        vec![
            "secrets",
            "set",
            "cam-17",
            "--brand",
            &brand,
            &format!("--value={value}"),
        ],
    ] {
        // Nothing listens there: the refusal comes before any call.
        let output = resctl("http://127.0.0.1:9", "res_unused", &args);
        let said = text(&output);
        assert_eq!(output.status.code(), Some(2), "{said}");
        assert!(!said.contains(value), "the value is repeated: {said}");
        assert!(said.contains("never from the command line"), "{said}");
    }
    // Other commands keep clap's own words.
    let output = resctl("http://127.0.0.1:9", "res_unused", &["rules", "--bogus"]);
    assert!(text(&output).contains("--bogus"));
}
