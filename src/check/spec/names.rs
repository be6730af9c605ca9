//! Lexical checks on names: C identifiers, reverse-DNS domains, domain normalisation.
#![forbid(unsafe_code)]

/// True when `s` follows C identifier syntax: a letter or `_`, then letters, digits or `_`.
pub(crate) fn is_c_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// True when `s` looks like a reverse-DNS name: dot-separated labels of letters, digits, `-`
/// and `_`, none empty.
pub(crate) fn is_reverse_dns(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// The canonical form of an operator-set domain: `ai.onnx` and the empty string are the same.
pub(crate) fn norm_domain(d: &str) -> &str {
    if d == "ai.onnx" {
        ""
    } else {
        d
    }
}

/// How a domain is shown in messages.
pub(crate) fn show_domain(d: &str) -> &str {
    if d.is_empty() {
        "ai.onnx (default)"
    } else {
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_identifiers() {
        assert!(is_c_identifier("x"));
        assert!(is_c_identifier("_conv1_W"));
        assert!(!is_c_identifier(""));
        assert!(!is_c_identifier("0"));
        assert!(!is_c_identifier("a.b"));
        assert!(!is_c_identifier("a-b"));
        assert!(!is_c_identifier("é"));
    }

    #[test]
    fn reverse_dns() {
        assert!(is_reverse_dns("org.onnx"));
        assert!(is_reverse_dns("com.microsoft"));
        assert!(!is_reverse_dns(""));
        assert!(!is_reverse_dns("org..onnx"));
        assert!(!is_reverse_dns("has space"));
    }

    #[test]
    fn domains() {
        assert_eq!(norm_domain("ai.onnx"), "");
        assert_eq!(norm_domain(""), "");
        assert_eq!(norm_domain("ai.onnx.ml"), "ai.onnx.ml");
    }
}
