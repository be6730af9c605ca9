//! Agreement with the reference parser (`onnx.parser`, run through `tests/py/text_ref.py`).
//!
//! For every text in `tests/text_corpus/` and every text `onnx.printer` makes of the backend
//! test models, our parse must serialise to the same proto as the reference's, and texts the
//! reference rejects must be rejected. Python is `$ONNXIFI_RUST_PYTHON`, else `.venv/bin/python`
//! under the crate root; without it the test fails.
//!
//! Corpus files hold one model each, or several cases when the first line is
//! `#! cases KIND [divergent]`, cases being separated by lines holding only `%%`. Cases in a
//! `divergent` file are known differences (reference bugs, or our stricter end-of-input rule):
//! they are counted and reported, and our side must still round-trip through the printer.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use onnxifi_rust::model::onnx::{FunctionProto, GraphProto, ModelProto, NodeProto};
use onnxifi_rust::text::{
    parse_function, parse_graph, parse_model, parse_node, print_function, print_graph, print_model,
    print_node,
};
use prost::Message;

/// Which parser a case goes to.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Model,
    Graph,
    Function,
    Node,
}

impl Kind {
    fn from_name(s: &str) -> Kind {
        match s {
            "model" => Kind::Model,
            "graph" => Kind::Graph,
            "function" => Kind::Function,
            "node" => Kind::Node,
            other => panic!("unknown case kind {other}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Model => "model",
            Kind::Graph => "graph",
            Kind::Function => "function",
            Kind::Node => "node",
        }
    }
}

/// One text to parse.
struct Case {
    label: String,
    kind: Kind,
    text: String,
    divergent: bool,
}

/// Our parse of a case, serialised (the message bytes of whichever proto the kind gives).
fn ours(kind: Kind, text: &str) -> Result<Vec<u8>, String> {
    let e = |e: onnxifi_rust::text::ParseError| e.to_string();
    match kind {
        Kind::Model => parse_model(text).map(|m| m.encode_to_vec()).map_err(e),
        Kind::Graph => parse_graph(text).map(|m| m.encode_to_vec()).map_err(e),
        Kind::Function => parse_function(text).map(|m| m.encode_to_vec()).map_err(e),
        Kind::Node => parse_node(text).map(|m| m.encode_to_vec()).map_err(e),
    }
}

/// Whether two serialised protos of `kind` are equal as messages.
fn same_message(kind: Kind, a: &[u8], b: &[u8]) -> bool {
    fn eq<M: Message + Default + PartialEq>(a: &[u8], b: &[u8]) -> bool {
        match (M::decode(a), M::decode(b)) {
            // Equal fields, or equal re-encodings (which also settles NaN == NaN).
            (Ok(x), Ok(y)) => x == y || x.encode_to_vec() == y.encode_to_vec(),
            _ => false,
        }
    }
    match kind {
        Kind::Model => eq::<ModelProto>(a, b),
        Kind::Graph => eq::<GraphProto>(a, b),
        Kind::Function => eq::<FunctionProto>(a, b),
        Kind::Node => eq::<NodeProto>(a, b),
    }
}

/// Prints a serialised proto of `kind` back to text with our printer.
fn reprint(kind: Kind, bytes: &[u8]) -> String {
    match kind {
        Kind::Model => print_model(&ModelProto::decode(bytes).unwrap()),
        Kind::Graph => print_graph(&GraphProto::decode(bytes).unwrap()),
        Kind::Function => print_function(&FunctionProto::decode(bytes).unwrap()),
        Kind::Node => print_node(&NodeProto::decode(bytes).unwrap()),
    }
}

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> PathBuf {
    match std::env::var_os("ONNXIFI_RUST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => crate_dir().join(".venv/bin/python"),
    }
}

/// Whether Python with `onnx` runs; under `CI` its absence is a failure.
fn reference_available() -> bool {
    let ok = Command::new(python())
        .args(["-c", "import onnx.parser, onnx.printer"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import onnx: run scripts/setup-test-env.sh (or set ONNXIFI_RUST_PYTHON)",
        python().display()
    );
    ok
}

/// A fresh scratch folder for this test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("onnxifi-text-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

/// Runs the helper script and returns its stdout lines.
fn helper(args: &[&str]) -> Vec<String> {
    let out = Command::new(python())
        .arg(crate_dir().join("tests/py/text_ref.py"))
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "text_ref.py {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The reference's verdict on each case: `Ok(bytes)` or `Err(message)`.
fn reference_parse(cases: &[Case], dir: &Path) -> Vec<Result<Vec<u8>, String>> {
    let mut manifest = String::new();
    for (i, c) in cases.iter().enumerate() {
        let p = dir.join(format!("case{i}.txt"));
        std::fs::write(&p, &c.text).unwrap();
        manifest.push_str(&format!("{}\t{}\n", c.kind.name(), p.display()));
    }
    let mpath = dir.join("manifest.tsv");
    std::fs::write(&mpath, manifest).unwrap();
    let lines = helper(&["parse", mpath.to_str().unwrap()]);
    assert_eq!(lines.len(), cases.len(), "one verdict per case");
    lines
        .iter()
        .map(|l| match l.strip_prefix("OK ") {
            Some(hex) => Ok(decode_hex(hex)),
            None => Err(l.strip_prefix("ERR ").unwrap_or(l).to_string()),
        })
        .collect()
}

fn decode_hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// Every case of the corpus.
fn corpus() -> Vec<Case> {
    let dir = crate_dir().join("tests/text_corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/text_corpus exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let fname = f.file_name().unwrap().to_string_lossy().to_string();
        let Some(header) = text.strip_prefix("#! cases ") else {
            cases.push(Case {
                label: fname,
                kind: Kind::Model,
                text,
                divergent: false,
            });
            continue;
        };
        let (first, body) = header.split_once('\n').unwrap_or((header, ""));
        let mut words = first.split_whitespace();
        let kind = Kind::from_name(words.next().expect("a kind after #! cases"));
        let divergent = words.next() == Some("divergent");
        for (i, t) in body.split("\n%%\n").enumerate() {
            cases.push(Case {
                label: format!("{fname}#{i}"),
                kind,
                text: t.to_string(),
                divergent,
            });
        }
    }
    cases
}

/// Compares ours and the reference's verdicts; returns (agreements, disagreement reports).
fn compare(cases: &[Case], refs: &[Result<Vec<u8>, String>]) -> (usize, Vec<String>) {
    let mut agree = 0;
    let mut reports = Vec::new();
    for (c, r) in cases.iter().zip(refs) {
        let mine = ours(c.kind, &c.text);
        let verdict = match (&mine, r) {
            (Ok(a), Ok(b)) if same_message(c.kind, a, b) => None,
            (Ok(_), Ok(_)) => Some("both accept, protos differ".to_string()),
            (Err(_), Err(_)) => None,
            (Ok(_), Err(e)) => Some(format!("we accept, reference rejects: {e}")),
            (Err(e), Ok(_)) => Some(format!("we reject, reference accepts: {e}")),
        };
        match verdict {
            None => agree += 1,
            Some(v) => reports.push(format!("{} ({}): {v}", c.label, c.kind.name())),
        }
    }
    (agree, reports)
}

#[test]
fn corpus_agrees_with_reference() {
    if !reference_available() {
        return;
    }
    let all = corpus();
    assert!(all.len() > 150, "corpus too small: {}", all.len());
    let dir = scratch("corpus");
    let refs = reference_parse(&all, &dir);

    let (main, main_refs): (Vec<_>, Vec<_>) = all
        .iter()
        .zip(&refs)
        .filter(|(c, _)| !c.divergent)
        .map(|(c, r)| {
            (
                Case {
                    label: c.label.clone(),
                    kind: c.kind,
                    text: c.text.clone(),
                    divergent: false,
                },
                r.clone(),
            )
        })
        .unzip();
    let (agree, reports) = compare(&main, &main_refs);
    let accepted = main_refs.iter().filter(|r| r.is_ok()).count();
    eprintln!(
        "corpus: {agree} of {} cases agree with onnx.parser ({accepted} accepted by it, {} rejected)",
        main.len(),
        main.len() - accepted
    );

    // The invalid-text file must be rejected by both sides, whatever else happens.
    for (c, r) in main.iter().zip(&main_refs) {
        if c.label.starts_with("cases_invalid.txt") {
            assert!(
                r.is_err(),
                "{}: reference accepts a text listed as invalid",
                c.label
            );
            assert!(
                ours(c.kind, &c.text).is_err(),
                "{}: we accept an invalid text",
                c.label
            );
        }
    }

    // Known divergences: reported, and our own parse must survive printing.
    let divergent: Vec<&Case> = all.iter().filter(|c| c.divergent).collect();
    for c in &divergent {
        if let Ok(bytes) = ours(c.kind, &c.text) {
            let again = ours(c.kind, &reprint(c.kind, &bytes)).expect("our print parses");
            assert!(
                same_message(c.kind, &bytes, &again),
                "{}: print/parse changes it",
                c.label
            );
        }
    }
    eprintln!(
        "corpus: {} known divergences reported separately",
        divergent.len()
    );

    assert!(
        reports.is_empty(),
        "{} disagreements:\n{}",
        reports.len(),
        reports.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corpus_print_parse_is_stable() {
    // print(parse(t)) parses to the same proto as t, for every text we accept.
    let mut checked = 0;
    for c in corpus() {
        let Ok(bytes) = ours(c.kind, &c.text) else {
            continue;
        };
        let printed = reprint(c.kind, &bytes);
        let again = ours(c.kind, &printed)
            .unwrap_or_else(|e| panic!("{}: printed text does not parse: {e}\n{printed}", c.label));
        assert!(
            same_message(c.kind, &bytes, &again),
            "{}: differs after printing:\n{printed}",
            c.label
        );
        checked += 1;
    }
    assert!(checked > 80, "only {checked} corpus texts parse");
}

#[test]
fn reference_printer_output_agrees() {
    if !reference_available() {
        return;
    }
    let dir = scratch("backend");
    let listing = helper(&["print-backend", dir.to_str().unwrap()]);
    assert!(
        listing.len() >= 100,
        "expected the backend models, got {}",
        listing.len()
    );
    let cases: Vec<Case> = listing
        .iter()
        .map(|l| {
            let (n, name) = l.split_once('\t').unwrap();
            let text = std::fs::read_to_string(dir.join(format!("{n}.txt"))).unwrap();
            Case {
                label: name.to_string(),
                kind: Kind::Model,
                text,
                divergent: false,
            }
        })
        .collect();
    let pdir = scratch("backend-parse");
    let refs = reference_parse(&cases, &pdir);
    let (agree, reports) = compare(&cases, &refs);
    eprintln!(
        "onnx.printer texts of backend models: {agree} of {} agree",
        cases.len()
    );
    assert!(
        reports.is_empty(),
        "{} disagreements:\n{}",
        reports.len(),
        reports.join("\n")
    );

    // The other direction: the reference reads our printer's text as we do.
    let ours_printed: Vec<Case> = cases
        .iter()
        .map(|c| {
            let m = parse_model(&c.text).expect("parsed above");
            Case {
                label: c.label.clone(),
                kind: Kind::Model,
                text: print_model(&m),
                divergent: false,
            }
        })
        .collect();
    let refs2 = reference_parse(&ours_printed, &pdir);
    let (agree2, reports2) = compare(&ours_printed, &refs2);
    eprintln!(
        "our printer's texts of backend models: {agree2} of {} read the same by onnx.parser",
        cases.len()
    );
    assert!(
        reports2.is_empty(),
        "{} disagreements:\n{}",
        reports2.len(),
        reports2.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&pdir);
}

/// The models behind the backend test data (`onnx.backend.test.case`, node and model cases):
/// our print/parse round trip, and agreement with `onnx.parser` on `onnx.printer`'s text of
/// each and on our printer's text of each.
#[test]
fn generated_case_models() {
    if !reference_available() {
        return;
    }
    let dir = scratch("cases");
    let listing = helper(&["dump-cases", dir.to_str().unwrap()]);
    assert!(
        listing.len() > 1000,
        "expected the generated cases, got {}",
        listing.len()
    );
    let (mut exact, mut normalized) = (0, 0);
    let mut failures = Vec::new();
    let mut printed_by_ref = Vec::new();
    let mut printed_by_us = Vec::new();
    for l in &listing {
        let (n, name) = l.split_once('\t').unwrap();
        let bytes = std::fs::read(dir.join(format!("{n}.onnx"))).unwrap();
        let m = ModelProto::decode(bytes.as_slice()).expect("valid model");
        let text = print_model(&m);
        match parse_model(&text) {
            Ok(back) => {
                let same = |a: &ModelProto, b: &ModelProto| {
                    a == b || a.encode_to_vec() == b.encode_to_vec()
                };
                exact += usize::from(same(&back, &m));
                if same(&back, &onnxifi_rust::text::normalize_model(&m)) {
                    normalized += 1;
                } else {
                    failures.push(format!("{name}: differs after normalising"));
                }
                printed_by_us.push(Case {
                    label: name.to_string(),
                    kind: Kind::Model,
                    text,
                    divergent: false,
                });
            }
            Err(e) => failures.push(format!("{name}: our printed text does not parse: {e}")),
        }
        if let Ok(t) = std::fs::read_to_string(dir.join(format!("{n}.txt"))) {
            printed_by_ref.push(Case {
                label: name.to_string(),
                kind: Kind::Model,
                text: t,
                divergent: false,
            });
        }
    }
    eprintln!(
        "generated models: {} total, {exact} round-trip exactly, {normalized} after normalising",
        listing.len()
    );
    let pdir = scratch("cases-parse");
    let refs = reference_parse(&printed_by_ref, &pdir);
    let (agree, reports) = compare(&printed_by_ref, &refs);
    let ref_ok = refs.iter().filter(|r| r.is_ok()).count();
    eprintln!(
        "onnx.printer texts of generated models: {agree} of {} agree ({ref_ok} accepted by onnx.parser)",
        printed_by_ref.len()
    );
    let refs2 = reference_parse(&printed_by_us, &pdir);
    let (agree2, reports2) = compare(&printed_by_us, &refs2);
    eprintln!(
        "our printer's texts of generated models: {agree2} of {} read the same by onnx.parser",
        printed_by_us.len()
    );
    for r in failures.iter().chain(&reports).chain(&reports2).take(40) {
        eprintln!("  {r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&pdir);
    assert!(
        failures.is_empty(),
        "{} round-trip failures",
        failures.len()
    );
    assert!(
        reports.is_empty(),
        "{} disagreements on onnx.printer texts",
        reports.len()
    );
    assert!(
        reports2.is_empty(),
        "{} disagreements on our printer's texts",
        reports2.len()
    );
}
