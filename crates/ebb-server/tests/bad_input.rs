//! Bad input is a 400 (413 for a body over the limit) with a JSON message
//! saying what is wrong, and the node keeps serving.

mod common;

use common::Cluster;
use ebb_server::api::ErrorBody;
use reqwest::StatusCode;

/// Sends a request, returns the status and the error message.
async fn send(request: reqwest::RequestBuilder) -> (StatusCode, String) {
    error_of(request.send().await.unwrap()).await
}

/// The status of an answer and the message of its JSON error body.
async fn error_of(answer: reqwest::Response) -> (StatusCode, String) {
    let status = answer.status();
    let body = answer.bytes().await.unwrap();
    let error: ErrorBody = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{status}: not a JSON error ({e}): {}", String::from_utf8_lossy(&body)));
    (status, error.error)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_400_with_a_message() {
    let cluster = Cluster::start(1, |c| c.max_body_bytes = 9 << 20).await;
    let base = format!("http://{}", cluster.addrs[&1]);
    let http = reqwest::Client::new();
    let post = |path: &str, body: &str| http.post(format!("{base}{path}")).body(body.to_string());

    let cases: Vec<(&str, reqwest::RequestBuilder, &str)> = vec![
        ("malformed JSON", post("/batch", "[{\"op\":\"set\""), "malformed JSON"),
        ("unknown operation", post("/batch", r#"[{"op":"merge","key":"a"}]"#), "unknown variant"),
        ("range begins after its end", post("/delete_range", r#"{"begin":"b","end":"a"}"#), "begins after"),
        ("range missing a field", post("/delete_range", r#"{"begin":"b"}"#), "missing field `end`"),
        (
            "batch with a reversed range",
            post("/batch", r#"[{"op":"delete_range","begin":"z","end":"a"}]"#),
            "begins after",
        ),
        ("scan limit 0", http.get(format!("{base}/scan?limit=0")), "limit must be at least 1"),
        ("scan limit not a number", http.get(format!("{base}/scan?limit=ten")), "bad query string"),
        ("scan start after end", http.get(format!("{base}/scan?start=b&end=a")), "is after end"),
        ("unknown read option", http.get(format!("{base}/kv/a?consistency=weak")), "bad query string"),
        ("value not UTF-8", http.put(format!("{base}/kv/a")).body(vec![0xff, 0xfe]), "not UTF-8"),
        ("empty membership", post("/change-membership", r#"{"members":[]}"#), "at least one voter"),
        ("init without this node", post("/init", r#"{"members":{"7":"127.0.0.1:1"}}"#), "must include this node"),
    ];
    for (what, request, expected) in cases {
        let (status, message) = send(request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {message}");
        assert!(message.contains(expected), "{what}: {message:?} does not say {expected:?}");
    }

    // A key over Ebb's limit, checked by `Request::validate` before it is
    // proposed.
    let long_key = "k".repeat(ebb::MAX_KEY_SIZE + 1);
    let body = serde_json::to_string(&serde_json::json!([{"op": "set", "key": long_key, "value": "v"}])).unwrap();
    let (status, message) = send(post("/batch", &body)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{message}");
    assert!(message.contains(&format!("key of {} bytes", ebb::MAX_KEY_SIZE + 1)), "{message}");

    // A body over the server's limit. The server answers before reading
    // the body and closes the connection: a client of its own, so that no
    // later request is sent on that connection. The close may reach the
    // client while it still writes the body (a broken pipe, before it reads
    // the answer): that attempt is made again, five times at most.
    let mut attempts = 0;
    let answer = loop {
        attempts += 1;
        match reqwest::Client::new().put(format!("{base}/kv/big")).body(vec![b'v'; 10 << 20]).send().await {
            Ok(answer) => break answer,
            Err(e) if e.is_request() && attempts < 5 => continue,
            Err(e) => panic!("a body over the limit, attempt {attempts}: {e}"),
        }
    };
    let (status, message) = error_of(answer).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{message}");
    assert!(message.contains("request body over"), "{message}");

    // A second init is a conflict, an unknown path a 404; both JSON.
    let (status, _) = send(post("/init", "")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, message) = send(http.get(format!("{base}/nope"))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{message}");

    // Nothing of it was applied, and the node still serves.
    let client = cluster.client(1);
    assert!(client.scan("", None, None, false).await.unwrap().items.is_empty());
    client.put("still", "serving").await.unwrap();
    assert_eq!(client.get("still").await.unwrap().as_deref(), Some("serving"));
    cluster.shutdown().await;
}
