//! The OpenAPI document (`/api/v1/openapi.json`) against what the server really does: real
//! requests — sessions, turns, events, blockers, undo, PRDs, tasks, errors — each checked
//! against the document. A status the document does not list for that operation, a response
//! body that does not match its schema (a missing required field, a wrong type, a field the
//! schema does not name), or a request body the schema describes that the server refuses, or
//! the other way round, fails the test with the operation and the JSON path.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

/// The document and the mismatches found so far.
struct Checker {
    doc: Value,
    errors: Vec<String>,
}

impl Checker {
    /// Follows a local `$ref` (`#/components/schemas/X`).
    fn resolve<'a>(&'a self, mut schema: &'a Value) -> &'a Value {
        while let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let pointer = r.trim_start_matches('#');
            schema = self
                .doc
                .pointer(pointer)
                .unwrap_or_else(|| panic!("unresolved $ref {r}"));
        }
        schema
    }

    /// Mismatches of `value` against `schema` (`at`: the JSON path, for messages). Objects
    /// with named properties are closed: a field the schema does not name is a mismatch
    /// (the document must say everything the server sends or accepts).
    fn mismatches(&self, schema: &Value, value: &Value, at: &str) -> Vec<String> {
        let schema = self.resolve(schema);
        let mut out = Vec::new();
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            for s in all {
                out.extend(self.mismatches(s, value, at));
            }
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(any) = schema.get(key).and_then(Value::as_array)
                && !any.iter().any(|s| self.mismatches(s, value, at).is_empty())
            {
                out.push(format!("{at}: {value} matches none of {key}"));
            }
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            out.push(format!("{at}: {value} is not one of {allowed:?}"));
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let nullable = schema.get("nullable") == Some(&Value::Bool(true));
        let unchecked = types.is_empty() || (value.is_null() && nullable);
        if !unchecked {
            let fits = types.iter().any(|t| match *t {
                "object" => value.is_object(),
                "array" => value.is_array(),
                "string" => value.is_string(),
                "integer" => value.is_i64() || value.is_u64(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                "null" => value.is_null(),
                _ => true,
            });
            if !fits {
                out.push(format!("{at}: {value} is not {types:?}"));
                return out;
            }
        }
        if let Value::Object(map) = value {
            let props = schema.get("properties").and_then(Value::as_object);
            if let Some(props) = props {
                for (name, s) in props {
                    if let Some(v) = map.get(name) {
                        out.extend(self.mismatches(s, v, &format!("{at}.{name}")));
                    }
                }
                let open = schema
                    .get("additionalProperties")
                    .is_some_and(|a| a != &Value::Bool(false));
                if !open {
                    for name in map.keys().filter(|k| !props.contains_key(*k)) {
                        out.push(format!("{at}.{name}: not in the schema"));
                    }
                }
            }
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !map.contains_key(name) {
                    out.push(format!("{at}.{name}: required, missing"));
                }
            }
        }
        if let (Value::Array(items), Some(s)) = (value, schema.get("items")) {
            for (i, v) in items.iter().enumerate() {
                out.extend(self.mismatches(s, v, &format!("{at}[{i}]")));
            }
        }
        out
    }

    fn operation(&self, method: &str, template: &str) -> &Value {
        self.doc["paths"]
            .get(template)
            .and_then(|p| p.get(method.to_lowercase()))
            .unwrap_or_else(|| panic!("{method} {template} is not in the document"))
    }

    /// Sends `body` to `path` (an instance of `template`), then checks the request body and
    /// the response against the document. Returns the response.
    async fn call(
        &mut self,
        srv: &TestServer,
        method: &str,
        template: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let op = self.operation(method, template).clone();
        let name = format!("{method} {template}");
        if body.is_some() {
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            if schema.is_null() {
                self.errors.push(format!(
                    "{name}: sends a body the document does not describe"
                ));
            }
        }
        let (status, response) = srv.request(method, path, body.clone()).await;
        let documented = &op["responses"][status.to_string()];
        if documented.is_null() {
            self.errors.push(format!(
                "{name}: answered {status} ({response}), which the document does not list"
            ));
            return (status, response);
        }
        let schema = &documented["content"]["application/json"]["schema"];
        if schema.is_null() {
            if !response.is_null() {
                self.errors.push(format!(
                    "{name} {status}: a body the document does not describe"
                ));
            }
        } else {
            let found = self.mismatches(schema, &response, &format!("{name} {status}"));
            self.errors.extend(found);
        }
        (status, response)
    }

    /// The request body `body` for `method template` fits the documented schema.
    fn request_fits(&self, method: &str, template: &str, body: &Value) -> bool {
        let schema = &self.operation(method, template)["requestBody"]["content"]["application/json"]
            ["schema"];
        self.mismatches(schema, body, "").is_empty()
    }
}

#[tokio::test]
async fn real_requests_and_responses_match_the_openapi_document() {
    let srv = TestServer::start_with_tasks().await;
    let (status, doc) = srv.get("/api/v1/openapi.json").await;
    assert_eq!(status, 200);
    let mut c = Checker {
        doc,
        errors: Vec::new(),
    };

    // Sessions and a turn that edits, answers a blocker, is undone.
    let script = srv.script(
        "turns.yaml",
        r#"turns:
  - tool_calls:
      - name: edit_file
        arguments: {path: src/lib.rs, edits: [{search: "a + b", replace: "b + a"}]}
  - tool_calls:
      - name: ask_user
        arguments: {question: "Which order?"}
  - text: "Done."
"#,
    );
    let ws = srv.workspace().display().to_string();
    let (status, session) = c
        .call(
            &srv,
            "POST",
            "/api/v1/sessions",
            "/api/v1/sessions",
            Some(json!({"workspace": ws, "provider": "scripted", "script": script, "execution_mode": "react"})),
        )
        .await;
    assert_eq!(status, 201, "{session}");
    let id = session["id"].as_str().unwrap().to_string();
    let s = |rest: &str| format!("/api/v1/sessions/{id}{rest}");
    c.call(
        &srv,
        "GET",
        "/api/v1/sessions",
        "/api/v1/sessions?limit=5",
        None,
    )
    .await;
    c.call(&srv, "GET", "/api/v1/sessions/{id}", &s(""), None)
        .await;
    let (status, turn) = c
        .call(
            &srv,
            "POST",
            "/api/v1/sessions/{id}/messages",
            &s("/messages"),
            Some(json!({"content": "swap the operands"})),
        )
        .await;
    assert_eq!(status, 200, "{turn}");
    c.call(
        &srv,
        "GET",
        "/api/v1/sessions/{id}/events",
        &s("/events?since_seq=0"),
        None,
    )
    .await;
    let (_, blockers) = c
        .call(
            &srv,
            "GET",
            "/api/v1/sessions/{id}/blockers",
            &s("/blockers?all=true"),
            None,
        )
        .await;
    if let Some(bid) = blockers[0]["id"].as_str() {
        c.call(
            &srv,
            "POST",
            "/api/v1/sessions/{id}/blockers/{blocker_id}/answer",
            &s(&format!("/blockers/{bid}/answer")),
            Some(json!({"answer": "b + a"})),
        )
        .await;
    }
    c.call(
        &srv,
        "POST",
        "/api/v1/sessions/{id}/undo",
        &s("/undo"),
        Some(json!({"turn": 0})),
    )
    .await;
    // Errors: no turn to cancel, an unknown approval, an empty message, unknown sessions.
    c.call(
        &srv,
        "POST",
        "/api/v1/sessions/{id}/cancel",
        &s("/cancel"),
        None,
    )
    .await;
    c.call(
        &srv,
        "POST",
        "/api/v1/sessions/{id}/approve",
        &s("/approve"),
        Some(json!({"call_id": "nope", "scope": "once"})),
    )
    .await;
    c.call(
        &srv,
        "POST",
        "/api/v1/sessions/{id}/deny",
        &s("/deny"),
        Some(json!({"call_id": "nope", "reason": "no"})),
    )
    .await;
    c.call(
        &srv,
        "POST",
        "/api/v1/sessions/{id}/messages",
        &s("/messages"),
        Some(json!({"content": "  "})),
    )
    .await;
    c.call(
        &srv,
        "GET",
        "/api/v1/sessions/{id}",
        "/api/v1/sessions/no-such-session",
        None,
    )
    .await;
    c.call(
        &srv,
        "GET",
        "/api/v1/sessions/{id}/events",
        "/api/v1/sessions/no-such-session/events",
        None,
    )
    .await;

    // PRDs and tasks, with every field the request schemas name.
    let (status, prd) = c
        .call(
            &srv,
            "POST",
            "/api/v1/prds",
            "/api/v1/prds",
            Some(json!({"workspace": ws, "title": "Greeter", "body": "# Greeter\nSay hi.\n"})),
        )
        .await;
    assert_eq!(status, 201, "{prd}");
    c.call(&srv, "GET", "/api/v1/prds", "/api/v1/prds", None)
        .await;
    c.call(&srv, "GET", "/api/v1/prds/{id}", "/api/v1/prds/1", None)
        .await;
    c.call(
        &srv,
        "PUT",
        "/api/v1/prds/{id}",
        "/api/v1/prds/1",
        Some(json!({"body": "# Greeter\nSay hi and bye.\n"})),
    )
    .await;
    c.call(&srv, "GET", "/api/v1/prds/{id}", "/api/v1/prds/9", None)
        .await;
    let full_task = json!({
        "workspace": ws, "prd": 1, "title": "Say hi", "description": "print hi",
        "acceptance_criteria": ["prints hi"], "size": "s", "depends_on": [],
    });
    assert!(c.request_fits("POST", "/api/v1/tasks", &full_task));
    let (status, task) = c
        .call(
            &srv,
            "POST",
            "/api/v1/tasks",
            "/api/v1/tasks",
            Some(full_task),
        )
        .await;
    assert_eq!(status, 201, "{task}");
    // What the schema names is what the server takes: an unknown field is refused.
    let unknown = json!({"title": "x", "estimate": 3});
    assert!(!c.request_fits("POST", "/api/v1/tasks", &unknown));
    let (status, _) = c
        .call(
            &srv,
            "POST",
            "/api/v1/tasks",
            "/api/v1/tasks",
            Some(unknown),
        )
        .await;
    assert_eq!(status, 422);
    c.call(
        &srv,
        "POST",
        "/api/v1/tasks",
        "/api/v1/tasks",
        Some(json!({"title": "Say bye", "depends_on": [42]})),
    )
    .await;
    c.call(&srv, "GET", "/api/v1/tasks", "/api/v1/tasks", None)
        .await;
    c.call(&srv, "GET", "/api/v1/tasks/{id}", "/api/v1/tasks/1", None)
        .await;
    c.call(&srv, "GET", "/api/v1/tasks/{id}", "/api/v1/tasks/77", None)
        .await;
    c.call(
        &srv,
        "PATCH",
        "/api/v1/tasks/{id}",
        "/api/v1/tasks/1",
        Some(json!({"status": "blocked", "acceptance_criteria": ["prints hi", "exits 0"]})),
    )
    .await;
    c.call(
        &srv,
        "GET",
        "/api/v1/work/status",
        "/api/v1/work/status",
        None,
    )
    .await;
    c.call(
        &srv,
        "POST",
        "/api/v1/work/start",
        "/api/v1/work/start",
        Some(json!({"task": 1})),
    )
    .await;
    c.call(
        &srv,
        "DELETE",
        "/api/v1/tasks/{id}",
        "/api/v1/tasks/1",
        None,
    )
    .await;
    c.call(&srv, "DELETE", "/api/v1/sessions/{id}", &s(""), None)
        .await;

    assert!(
        c.errors.is_empty(),
        "the OpenAPI document differs from the server:\n{}",
        c.errors.join("\n")
    );
}
