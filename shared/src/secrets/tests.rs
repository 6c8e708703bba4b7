use serde_json::json;

use super::*;

#[test]
fn names_follow_one_rule() {
    for good in ["analytics-token", "camera-17-rtsp", "a", "x.y_z", "0day"] {
        assert_eq!(check_name(good), Ok(()), "{good}");
    }
    for bad in [
        "",
        "with space",
        "Upper",
        "-lead",
        "ümlaut",
        "a/b",
        &"x".repeat(64),
    ] {
        assert!(
            matches!(check_name(bad), Err(SecretError::BadName(_))),
            "{bad}"
        );
    }
}

#[test]
fn values_must_be_maskable_and_carryable() {
    assert_eq!(check_value(""), Err(SecretError::TooShort));
    assert_eq!(check_value("abc"), Err(SecretError::TooShort));
    assert_eq!(check_value("abcd"), Ok(()));
    assert_eq!(check_value("ab\0cd"), Err(SecretError::Nul));
    assert_eq!(
        check_value(&"x".repeat(MAX_VALUE_BYTES + 1)),
        Err(SecretError::TooLong)
    );
}

#[test]
fn references_are_found_inside_strings_at_their_paths() {
    let config = json!({
        "url": "rtsp://viewer:${secret:cam-pass}@10.0.0.7/stream",
        "headers": {"Authorization": "Bearer ${secret:analytics-token}"},
        "args": ["--user", "${secret:cam-pass}"],
        "${secret:not-a-key-reference}": 1,
    });
    let found = references(&config).expect("well formed");
    assert_eq!(
        found,
        vec![
            ("cam-pass".to_owned(), ".args[1]".to_owned()),
            (
                "analytics-token".to_owned(),
                ".headers.Authorization".to_owned()
            ),
        ]
    );
    let unfinished = references(&json!({"h": {"x": "${secret:abc"}}));
    assert_eq!(
        unfinished,
        Err(ReferenceProblem {
            path: ".h.x".into(),
            error: SecretError::Unfinished
        })
    );
    assert!(matches!(
        references(&json!(["${secret:Bad Name}"])),
        Err(ReferenceProblem {
            error: SecretError::BadName(_),
            ..
        })
    ));
}

#[test]
fn resolving_replaces_each_reference_and_names_the_first_missing_one() {
    let values = [
        ("cam-pass", "s3cr3t/p@ss"),
        ("analytics-token", "tok-123456"),
    ];
    let lookup = |name: &str| values.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    let mut config = json!({
        "url": "rtsp://viewer:${secret:cam-pass}@h/s",
        "n": 3,
        "h": ["Bearer ${secret:analytics-token}", "${secret:cam-pass}${secret:cam-pass}"],
    });
    resolve(&mut config, &lookup).expect("resolved");
    assert_eq!(
        config,
        json!({
            "url": "rtsp://viewer:s3cr3t/p@ss@h/s",
            "n": 3,
            "h": ["Bearer tok-123456", "s3cr3t/p@sss3cr3t/p@ss"],
        })
    );
    let mut missing = json!({"a": "${secret:gone}"});
    assert_eq!(
        resolve(&mut missing, &lookup),
        Err(SecretError::Missing("gone".into()))
    );
}

#[test]
fn the_masker_hides_values_as_written_url_encoded_and_json_escaped() {
    let masker = Masker::new(["s3cr3t/p@ss", "tok\"en\\1", "abc"]);
    assert_eq!(
        masker.mask("connect rtsp://viewer:s3cr3t%2Fp%40ss@h failed; s3cr3t/p@ss"),
        "connect rtsp://viewer:***@h failed; ***"
    );
    assert_eq!(masker.mask(r#"{"h":"tok\"en\\1"}"#), r#"{"h":"***"}"#);
    assert_eq!(
        masker.mask("abc stays: too short to be a secret"),
        "abc stays: too short to be a secret"
    );
    let mut output = json!({"error": "auth s3cr3t/p@ss refused", "s3cr3t/p@ss": [1, "tok\"en\\1"]});
    masker.mask_json(&mut output);
    assert_eq!(
        output,
        json!({"error": "auth *** refused", "***": [1, "***"]})
    );
    assert!(Masker::new([]).is_empty());
}

#[test]
fn inline_credentials_are_noticed_and_references_are_not() {
    assert!(inline_credential("rtsp://admin:hunter22@10.0.0.7/stream").is_some());
    assert!(inline_credential("Bearer eyJhbGciOiJIUzI1NiJ9.abc").is_some());
    assert!(inline_credential("rtsp://10.0.0.7/stream").is_none());
    assert!(inline_credential("rtsp://viewer@10.0.0.7/stream").is_none());
    assert!(inline_credential("rtsp://viewer:${secret:cam}@10.0.0.7/s").is_none());
    assert!(inline_credential("Bearer ${secret:analytics-token}").is_none());
    let found =
        inline_credentials(&json!({"headers": {"Authorization": "Basic YWRtaW46aHVudGVyMg=="}}));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, ".headers.Authorization");
}
