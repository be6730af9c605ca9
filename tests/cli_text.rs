//! `onnxifi-run check` and `onnxifi-run convert`, run as a user runs them: the binary cargo
//! built for this test, as a subprocess. Neither command needs the ONNXIFI library.
//!
//! The text conversion is compared with the reference parser (`onnx.parser`) through Python:
//! `$ONNXIFI_RUST_PYTHON`, else `.venv/bin/python`; without it that test fails (run
//! `scripts/setup-test-env.sh`).
#![forbid(unsafe_code)]

use onnxifi_rust::model::onnx::ModelProto;
use onnxifi_rust::text::normalize_model;
use prost::Message;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the CLI in the repository root with `args`, feeding `stdin` when given.
fn cli(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_onnxifi-run"))
        .args(args)
        .current_dir(root())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start onnxifi-run");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        pipe.write_all(bytes).expect("write stdin");
    }
    child.wait_with_output().expect("onnxifi-run runs")
}

/// stdout as text.
fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text.
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts the exit status, showing both streams when it differs.
fn assert_code(o: &Output, code: i32, what: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{what}: exit status\nstdout:\n{}\nstderr:\n{}",
        stdout(o),
        stderr(o)
    );
}

/// A scratch folder for one test, removed when the test is done with it.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("onnxifi-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    Scratch(dir)
}

/// A path as a `&str` argument.
fn arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A model whose only node reads a value nothing defines.
const UNDEFINED_INPUT: &str = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  y = Relu(nope)
}
"#;

/// A model that lists its output twice.
const DUPLICATE_OUTPUT: &str = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y, float[2] y) {
  y = Relu(x)
}
"#;

/// Text that does not parse: the call's `)` is missing on line 3.
const UNPARSEABLE: &str = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  y = Relu(x
}
"#;

#[test]
fn check_accepts_the_bundled_binary_and_text_models() {
    for (model, kind) in [
        ("examples/small_cnn.onnx", "binary"),
        ("examples/small_cnn_dynamic.onnx", "binary"),
        ("examples/small_mlp.onnxtxt", "text"),
    ] {
        let o = cli(&["check", model], None);
        assert_code(&o, 0, model);
        let out = stdout(&o);
        assert!(
            out.starts_with(&format!("{model}: valid ({kind} model;")),
            "{out}"
        );
        assert!(out.contains("no violations"), "{out}");
        assert_eq!(out.lines().count(), 1, "only the summary: {out}");
    }
}

#[test]
fn check_reports_each_violation_with_its_rule_and_exits_1() {
    let dir = scratch("check-invalid");
    for (name, text, rule, location) in [
        (
            "undefined.onnxtxt",
            UNDEFINED_INPUT,
            "input-not-produced",
            "graph 'g' node #0 (Relu)",
        ),
        (
            "duplicate.onnxtxt",
            DUPLICATE_OUTPUT,
            "unique-names",
            "graph 'g' output 'y' (#1)",
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let o = cli(&["check", arg(&path)], None);
        assert_code(&o, 1, name);
        let out = stdout(&o);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "one violation and the summary: {out}");
        assert!(
            lines[0].starts_with(&format!("[{rule}] {location}: ")),
            "{name}: {out}"
        );
        assert!(
            lines[1].contains("invalid: 1 violation(s) of 1 rule(s)") && lines[1].contains(rule),
            "{name}: {out}"
        );
    }
}

#[test]
fn check_reads_stdin_in_either_format() {
    let o = cli(&["check", "-"], Some(UNDEFINED_INPUT.as_bytes()));
    assert_code(&o, 1, "text on stdin");
    assert!(
        stdout(&o).starts_with("[input-not-produced] "),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("<stdin>: invalid"), "{}", stdout(&o));

    let binary = std::fs::read(root().join("examples/small_cnn.onnx")).unwrap();
    let o = cli(&["check", "-"], Some(&binary));
    assert_code(&o, 0, "binary on stdin");
    assert!(stdout(&o).starts_with("<stdin>: valid (binary model;"));

    let text = std::fs::read(root().join("examples/small_mlp.onnxtxt")).unwrap();
    let o = cli(&["check", "-"], Some(&text));
    assert_code(&o, 0, "text on stdin");
    assert!(stdout(&o).starts_with("<stdin>: valid (text model;"));

    // --from overrides the guess: the binary model is not text.
    let o = cli(&["check", "--from", "text", "-"], Some(&binary));
    assert_code(&o, 1, "binary read as text");
    assert!(stdout(&o).contains("not ONNX text"), "{}", stdout(&o));
}

#[test]
fn check_shows_where_text_does_not_parse_and_exits_1() {
    let dir = scratch("check-parse");
    let path = dir.join("broken.onnxtxt");
    std::fs::write(&path, UNPARSEABLE).unwrap();
    let o = cli(&["check", arg(&path)], None);
    assert_code(&o, 1, "unparseable text");
    let out = stdout(&o);
    assert!(
        out.contains("parse error at line 4, column 1: expected `)`, found `}`"),
        "{out}"
    );
    assert!(
        out.contains("\n4 | }\n  | ^\n"),
        "caret under the token: {out}"
    );

    // A truncated binary model does not decode.
    let bytes = std::fs::read(root().join("examples/small_cnn.onnx")).unwrap();
    let cut = dir.join("cut.onnx");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let o = cli(&["check", arg(&cut)], None);
    assert_code(&o, 1, "truncated binary");
    assert!(
        stdout(&o).contains("not a valid ModelProto"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["check"],
        vec!["check", "a.onnx", "b.onnx"],
        vec!["check", "--bogus", "examples/small_cnn.onnx"],
        vec!["check", "--from", "xml", "examples/small_cnn.onnx"],
        vec!["check", "/nonexistent/model.onnx"],
        vec!["convert", "examples/small_cnn.onnx"],
        vec![
            "convert",
            "examples/small_cnn.onnx",
            "out.onnx",
            "--to",
            "json",
        ],
        vec!["frobnicate"],
        vec![],
    ] {
        let o = cli(&args, None);
        assert_code(&o, 2, &format!("{args:?}"));
        assert!(
            stderr(&o).starts_with("onnxifi-run: "),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn convert_says_when_it_cannot_guess_the_output_format() {
    let dir = scratch("convert-guess");
    let out = dir.join("model.bin");
    for (args, says) in [
        (
            vec!["convert", "examples/small_cnn.onnx", "-"],
            "cannot tell which format to write to stdout: add --to text or --to onnx",
        ),
        (
            vec!["convert", "examples/small_cnn.onnx", arg(&out)],
            "from its extension (.onnx is binary, .onnxtxt and .txt are text)",
        ),
    ] {
        let o = cli(&args, None);
        assert_code(&o, 2, &format!("{args:?}"));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty());
    }
    assert!(!out.exists(), "nothing is written on a usage error");
    // With --to it works, and the file is binary.
    let o = cli(
        &[
            "convert",
            "examples/small_mlp.onnxtxt",
            arg(&out),
            "--to=onnx",
        ],
        None,
    );
    assert_code(&o, 0, "--to=onnx");
    ModelProto::decode(std::fs::read(&out).unwrap().as_slice()).expect("a binary model");
}

#[test]
fn convert_binary_to_text_and_back_gives_the_normal_form() {
    let dir = scratch("convert-roundtrip");
    for model in ["examples/small_cnn.onnx", "examples/small_cnn_dynamic.onnx"] {
        let original =
            ModelProto::decode(std::fs::read(root().join(model)).unwrap().as_slice()).unwrap();
        let txt = dir.join("m.onnxtxt");
        let back = dir.join("m.onnx");
        let o = cli(&["convert", model, arg(&txt)], None);
        assert_code(&o, 0, "onnx -> text");
        let o = cli(&["convert", arg(&txt), arg(&back)], None);
        assert_code(&o, 0, "text -> onnx");
        let got = ModelProto::decode(std::fs::read(&back).unwrap().as_slice()).unwrap();
        assert_eq!(got, normalize_model(&original), "{model}");
        assert!(!got.graph.as_ref().unwrap().node.is_empty());

        // The same through pipes: stdin -> stdout, formats sniffed and named with --to.
        let bytes = std::fs::read(root().join(model)).unwrap();
        let o = cli(&["convert", "-", "-", "--to", "text"], Some(&bytes));
        assert_code(&o, 0, "stdin onnx -> stdout text");
        assert_eq!(o.stdout, std::fs::read(&txt).unwrap(), "{model}: same text");
        let o = cli(&["convert", "-", "-", "--to", "onnx"], Some(&o.stdout));
        assert_code(&o, 0, "stdin text -> stdout onnx");
        let piped = ModelProto::decode(o.stdout.as_slice()).unwrap();
        assert_eq!(piped, normalize_model(&original), "{model} through pipes");
    }
}

/// Python with `onnx`; its absence fails the test.
fn python_with_onnx() -> Option<PathBuf> {
    let python = std::env::var_os("ONNXIFI_RUST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"));
    let ok = Command::new(&python)
        .args(["-c", "import onnx.parser"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    panic!(
        "{} cannot import onnx: run scripts/setup-test-env.sh (or set ONNXIFI_RUST_PYTHON)",
        python.display()
    )
}

/// The reference parser's model for a text file, serialized.
fn reference_parse(python: &Path, text_file: &Path) -> ModelProto {
    let out = Command::new(python)
        .args([
            "-c",
            "import sys, onnx.parser\n\
             m = onnx.parser.parse_model(open(sys.argv[1], encoding='utf-8').read())\n\
             sys.stdout.buffer.write(m.SerializeToString())",
        ])
        .arg(text_file)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "onnx.parser failed on {}: {}",
        text_file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    ModelProto::decode(out.stdout.as_slice()).expect("the reference's bytes decode")
}

#[test]
fn convert_text_agrees_with_the_reference_parser() {
    let Some(python) = python_with_onnx() else {
        return;
    };
    let dir = scratch("convert-reference");
    // The hand-written example, and the text the CLI prints for the binary examples.
    let printed = dir.join("cnn.onnxtxt");
    let o = cli(&["convert", "examples/small_cnn.onnx", arg(&printed)], None);
    assert_code(&o, 0, "onnx -> text");
    for text in [root().join("examples/small_mlp.onnxtxt"), printed] {
        let out = dir.join("out.onnx");
        let o = cli(&["convert", arg(&text), arg(&out)], None);
        assert_code(&o, 0, "text -> onnx");
        let ours = ModelProto::decode(std::fs::read(&out).unwrap().as_slice()).unwrap();
        let reference = reference_parse(&python, &text);
        assert!(
            ours == reference || ours.encode_to_vec() == reference.encode_to_vec(),
            "{}: ours and onnx.parser's differ\nours: {ours:?}\nreference: {reference:?}",
            text.display()
        );
    }
}

#[test]
fn check_lists_the_signature_violations_and_every_node_the_backend_refuses() {
    // A valid model with two operators this backend does not implement.
    let unsupported = br#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  [s1] a = Bernoulli(x)
  [s2] b = Bernoulli(a)
  y = Relu(b)
}"#;
    let o = cli(&["check", "-"], Some(unsupported));
    assert_code(&o, 0, "valid but unsupported");
    let out = stdout(&o);
    for needle in [
        "[backend] UNSUPPORTED_OPERATOR: node 's1' (Bernoulli)",
        "[backend] UNSUPPORTED_OPERATOR: node 's2' (Bernoulli)",
        "this backend refuses it (2 problem(s), first UNSUPPORTED_OPERATOR)",
    ] {
        assert!(out.contains(needle), "{needle:?} missing from:\n{out}");
    }
    // Signature violations: an unknown operator, a missing required attribute, a broken type
    // constraint, each on its own line.
    let invalid = br#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x, int64[2] k) => (float[2] y) {
  a = Gemmm(x, x)
  f = Cast(x)
  e = Add(x, k)
  y = Identity(x)
}"#;
    let o = cli(&["check", "-"], Some(invalid));
    assert_code(&o, 1, "signature violations");
    let out = stdout(&o);
    for needle in [
        "[operator-exists] graph 'g' node #0 (Gemmm)",
        "[attribute-required] graph 'g' node #1 (Cast): Cast version 13 requires attribute 'to'",
        "[type-constraint] graph 'g' node #2 (Add): input #1 'k' has type tensor(int64)",
        "this backend refuses it",
    ] {
        assert!(out.contains(needle), "{needle:?} missing from:\n{out}");
    }
}
