//! Pieces of a value at a text's edge: what a cut through a value leaves on one side of it.
//! Found with the Knuth–Morris–Pratt failure function, so a long value (a private key) costs
//! time in proportion to its length, not its square.

/// How long the longest start of `pattern` is that `text` ends with (shorter than the whole
/// pattern: a whole one is a match, not a piece).
pub(super) fn start_at_end(text: &[u8], pattern: &[u8]) -> usize {
    if pattern.len() < 2 {
        return 0;
    }
    let fail = failure(pattern);
    let from = text.len().saturating_sub(pattern.len() - 1);
    let mut state = 0;
    for &byte in &text[from..] {
        while state > 0 && pattern[state] != byte {
            state = fail[state - 1];
        }
        if pattern[state] == byte {
            state += 1;
        }
        if state == pattern.len() {
            state = fail[state - 1];
        }
    }
    state
}

/// How long the longest end of `pattern` is that `text` starts with (shorter than the whole
/// pattern).
pub(super) fn end_at_start(text: &[u8], pattern: &[u8]) -> usize {
    let head: Vec<u8> = text
        .iter()
        .take(pattern.len().saturating_sub(1))
        .rev()
        .copied()
        .collect();
    let reversed: Vec<u8> = pattern.iter().rev().copied().collect();
    start_at_end(&head, &reversed)
}

/// Whether all of `text` stands inside `pattern`.
pub(super) fn inside(text: &[u8], pattern: &[u8]) -> bool {
    if text.is_empty() || text.len() >= pattern.len() {
        return false;
    }
    let fail = failure(text);
    let mut state = 0;
    for &byte in pattern {
        while state > 0 && text[state] != byte {
            state = fail[state - 1];
        }
        if text[state] == byte {
            state += 1;
        }
        if state == text.len() {
            return true;
        }
    }
    false
}

/// `fail[i]`: the length of the longest proper start of `pattern[..=i]` that is also its end.
fn failure(pattern: &[u8]) -> Vec<usize> {
    let mut fail = vec![0; pattern.len()];
    let mut k = 0;
    for i in 1..pattern.len() {
        while k > 0 && pattern[i] != pattern[k] {
            k = fail[k - 1];
        }
        if pattern[i] == pattern[k] {
            k += 1;
        }
        fail[i] = k;
    }
    fail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_piece_at_each_edge_is_found() {
        assert_eq!(start_at_end(b"token=p@ssw", b"p@ssw0rd"), 5);
        assert_eq!(start_at_end(b"token=p@ssw0rd", b"p@ssw0rd"), 0, "whole");
        assert_eq!(start_at_end(b"aaab", b"aab"), 0);
        assert_eq!(start_at_end(b"xaaaa", b"aaab"), 3);
        assert_eq!(start_at_end(b"abab", b"ababc"), 4);
        assert_eq!(end_at_start(b"w0rd and more", b"p@ssw0rd"), 4);
        assert_eq!(end_at_start(b"nothing", b"p@ssw0rd"), 0);
        assert!(inside(b"ssw0", b"p@ssw0rd"));
        assert!(!inside(b"p@ssw0rd", b"p@ssw0rd"));
    }

    #[test]
    fn a_long_repetitive_value_costs_linear_time() {
        let pattern = vec![b'a'; 200_000];
        let mut text = vec![b'a'; 150_000];
        text.push(b'b');
        text.extend(vec![b'a'; 100_000]);
        assert_eq!(start_at_end(&text, &pattern), 100_000);
        assert_eq!(end_at_start(&text, &pattern), 150_000);
    }
}
