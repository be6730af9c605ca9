//! Robustness: mutated corpus texts (byte flips, insertions, deletions, truncations) must make
//! the parser return `Ok` or `Err`, never panic; and whatever parses must survive printing.
//! A deterministic stand-in for `fuzz/fuzz_targets/parse_text.rs` that runs on stable Rust.
#![forbid(unsafe_code)]

use std::path::Path;

use onnxifi_rust::text::{parse_function, parse_graph, parse_model, parse_node, print_model};
use prost::Message;

/// xorshift64*: a small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Characters that matter to the grammar, used for insertions and replacements.
const ALPHABET: &[u8] = b"<>()[]{}=,:@.\"\\#-+?0123456789eEinfaxyz_ \n\t";

/// One random edit of `text`.
fn mutate(rng: &mut Rng, text: &[u8]) -> Vec<u8> {
    let mut t = text.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(t.len() + 1);
        match rng.below(6) {
            0 => t.truncate(at),
            1 if at < t.len() => t[at] ^= 1 << rng.below(8),
            2 => t.insert(at, ALPHABET[rng.below(ALPHABET.len())]),
            3 if at < t.len() => {
                t.remove(at);
            }
            4 if at < t.len() => t[at] = ALPHABET[rng.below(ALPHABET.len())],
            _ => {
                // Duplicate a slice, which nests brackets and repeats lists.
                let end = (at + rng.below(40)).min(t.len());
                let piece = t[at..end].to_vec();
                t.splice(at..at, piece);
            }
        }
    }
    t
}

#[test]
fn mutated_corpus_never_panics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/text_corpus");
    let mut texts: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read(e.path()).unwrap())
        .collect();
    texts.sort();
    assert!(texts.len() >= 10);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut ok, mut err) = (0usize, 0usize);
    for text in &texts {
        for _ in 0..1500 {
            let bytes = mutate(&mut rng, text);
            // The API takes text; invalid UTF-8 is the caller's to reject, so use the valid prefix.
            let s = match std::str::from_utf8(&bytes) {
                Ok(s) => s,
                Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap(),
            };
            match parse_model(s) {
                Ok(m) => {
                    ok += 1;
                    let again = parse_model(&print_model(&m)).expect("printed text parses");
                    assert_eq!(
                        again.encode_to_vec(),
                        m.encode_to_vec(),
                        "print/parse changed:\n{s}"
                    );
                }
                Err(e) => {
                    err += 1;
                    // Rendering must not panic either, and the caret stays on the line.
                    let shown = e.to_string();
                    assert!(shown.lines().count() == 3, "{shown}");
                }
            }
            let _ = parse_graph(s);
            let _ = parse_function(s);
            let _ = parse_node(s);
        }
    }
    eprintln!("mutations: {ok} parsed, {err} rejected");
    assert!(ok > 0 && err > 0);
}
