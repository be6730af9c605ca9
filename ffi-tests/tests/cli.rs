//! Tests of the `onnxifi-run` CLI as a user runs it: the release binary (env `ONNXIFI_RUN_BIN`
//! overrides) with `--lib` pointing at the library under test; printed outputs are compared
//! with onnxruntime's, computed at test time. Text models (`.onnxtxt`) run too; `check` and
//! `convert` are tested in the root crate's `tests/cli_text.rs`.

use onnxifi_ffi_tests::{library_path, models, read_f32, repo_root};
use std::path::PathBuf;
use std::process::{Command, Output};

/// The CLI binary; panics with instructions when it has not been built.
fn cli() -> PathBuf {
    let p = std::env::var_os("ONNXIFI_RUN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/release/onnxifi-run"));
    assert!(
        p.exists(),
        "{} does not exist: run `cargo build --release` first (or set ONNXIFI_RUN_BIN)",
        p.display()
    );
    p
}

/// Runs the CLI in the repository root with `--lib` and `args`.
fn run_cli(args: &[&str]) -> Output {
    let lib = library_path();
    assert!(
        lib.exists(),
        "{}: run `cargo build --release` first",
        lib.display()
    );
    Command::new(cli())
        .arg("--lib")
        .arg(lib)
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("cannot start onnxifi-run")
}

/// The values printed on the `output NAME ...: [v, ...]` line.
fn printed_values(out: &Output, name: &str) -> Vec<f32> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "onnxifi-run failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("output {name} ")))
        .unwrap_or_else(|| panic!("no output line for {name}:\n{stdout}"));
    let list = &line[line.find('[').expect("shape")..];
    let values = &list[list.rfind('[').expect("values") + 1..list.rfind(']').expect("values")];
    values
        .split(", ")
        .filter(|v| *v != "...")
        .map(|v| v.parse().expect("a number"))
        .collect()
}

/// Asserts printed values agree with expected ones (the CLI prints 6 decimals).
fn assert_printed(got: &[f32], want: &[f32]) {
    assert!(!got.is_empty());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 2e-6, "[{i}] printed {g}, expected {w}");
    }
}

#[test]
fn run_small_cnn_prints_onnxruntime_values() {
    let out = run_cli(&["run", "examples/small_cnn.onnx", "--repeat", "3"]);
    let got = printed_values(&out, "probs");
    assert_eq!(got.len(), 10);
    assert_printed(&got, &read_f32("small_cnn.b1.out.bin"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("output probs [1, 10] float32"), "{stdout}");
    assert!(stdout.contains("latency over 3 run(s)"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("backend: ")),
        "{stdout}"
    );
}

#[test]
fn run_dynamic_batch_with_dim_and_input_file() {
    let input = models().join("cli_input_b2.bin");
    let x = onnxifi_ffi_tests::deterministic_input(2 * 3 * 16 * 16);
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&input, bytes).expect("write input");
    let model = models().join("small_cnn_dynamic.onnx");
    let out = run_cli(&[
        "run",
        model.to_str().expect("utf-8 path"),
        "--dim",
        "N=2",
        "--input",
        &format!("input={}", input.display()),
        "--repeat",
        "1",
    ]);
    let got = printed_values(&out, "probs");
    assert_printed(&got, &read_f32("small_cnn.b2.out.bin"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("output probs [2, 10] float32"));
}

#[test]
fn run_rejects_bad_arguments() {
    for args in [
        vec!["frobnicate"],
        vec!["run"],
        vec!["run", "examples/small_cnn.onnx", "--repeat", "0"],
        vec![
            "run",
            "examples/small_cnn.onnx",
            "--input",
            "nosuch=/dev/null",
        ],
        vec![
            "run",
            "examples/small_cnn.onnx",
            "--input",
            "input=/dev/null",
        ],
        vec!["run", "/nonexistent/model.onnx"],
    ] {
        let out = run_cli(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            String::from_utf8_lossy(&out.stderr).starts_with("onnxifi-run: "),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The `output NAME [shape] type: [values]` lines of a successful run.
fn output_lines(out: &Output) -> Vec<String> {
    assert!(
        out.status.success(),
        "onnxifi-run failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("output "))
        .map(str::to_string)
        .collect()
}

#[test]
fn run_text_model_prints_the_same_values_as_the_binary_model() {
    let dir = models().join("cli_text");
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let text = dir.join("small_cnn.onnxtxt");
    let convert = run_cli(&[
        "convert",
        "examples/small_cnn.onnx",
        text.to_str().expect("utf-8 path"),
    ]);
    assert!(
        convert.status.success(),
        "{}",
        String::from_utf8_lossy(&convert.stderr)
    );
    let binary = output_lines(&run_cli(&[
        "run",
        "examples/small_cnn.onnx",
        "--repeat",
        "1",
    ]));
    let from_text = run_cli(&["run", text.to_str().expect("utf-8"), "--repeat", "1"]);
    assert_eq!(output_lines(&from_text), binary);
    assert_eq!(binary.len(), 1);
    assert_printed(
        &printed_values(&from_text, "probs"),
        &read_f32("small_cnn.b1.out.bin"),
    );
}

/// onnxruntime's output of `examples/small_mlp.onnxtxt` (parsed by `onnx.parser`, not by us)
/// for the CLI's deterministic input of shape [1, 4].
fn onnxruntime_small_mlp() -> Vec<f32> {
    let python = std::env::var_os("ONNXIFI_TEST_PYTHON")
        .or_else(|| std::env::var_os("ONNXIFI_RUST_PYTHON"))
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"));
    let script = "import sys, numpy as np, onnx.parser, onnxruntime as ort\n\
        m = onnx.parser.parse_model(open(sys.argv[1], encoding='utf-8').read())\n\
        x = np.array([((i * 37 + 11) % 101) / 50 - 1 for i in range(4)], np.float32).reshape(1, 4)\n\
        s = ort.InferenceSession(m.SerializeToString(), providers=['CPUExecutionProvider'])\n\
        print(' '.join(repr(float(v)) for v in s.run(None, {'x': x})[0].ravel()))";
    let out = Command::new(&python)
        .args(["-c", script])
        .arg(repo_root().join("examples/small_mlp.onnxtxt"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        out.status.success(),
        "onnxruntime failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|v| v.parse().expect("a number"))
        .collect()
}

#[test]
fn run_bundled_text_example_matches_onnxruntime() {
    let want = onnxruntime_small_mlp();
    assert_eq!(want.len(), 3);
    let out = run_cli(&["run", "examples/small_mlp.onnxtxt", "--repeat", "2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("output probs [1, 3] float32"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = printed_values(&out, "probs");
    assert_eq!(got.len(), 3);
    assert_printed(&got, &want);
    // The text model read from stdin, its format sniffed, gives the same line.
    let text = std::fs::read(repo_root().join("examples/small_mlp.onnxtxt")).expect("example");
    let mut child = Command::new(cli())
        .arg("--lib")
        .arg(library_path())
        .args(["run", "-", "--repeat", "1"])
        .current_dir(repo_root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cannot start onnxifi-run");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), &text).expect("write");
    let piped = child.wait_with_output().expect("onnxifi-run runs");
    assert_eq!(output_lines(&piped), output_lines(&out));
}
