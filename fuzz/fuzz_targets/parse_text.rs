//! Fuzz target: any UTF-8 text must parse to `Ok` or `Err` without panicking, error rendering
//! must not panic, and a parsed model must read back the same after printing.
//!
//! Run with `scripts/fuzz.sh parse_text SECONDS` (seeded from tests/text_corpus).
#![no_main]
#![forbid(unsafe_code)]

use libfuzzer_sys::fuzz_target;
use onnxifi_rust::text::{parse_function, parse_graph, parse_model, parse_node, print_model};
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_model(text) {
        Ok(m) => {
            let again = parse_model(&print_model(&m)).expect("printed text parses");
            assert_eq!(again.encode_to_vec(), m.encode_to_vec());
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    let _ = parse_graph(text);
    let _ = parse_function(text);
    let _ = parse_node(text);
});
