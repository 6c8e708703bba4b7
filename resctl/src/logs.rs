//! `resctl executions logs`: what a run's programs printed, as kubectl logs prints a pod's.

use res_shared::untrusted::UntrustedLines;
use res_shared::wire::{NodeOutput, OutputStream, thousands};

/// The entries to print: all, or one stream's.
pub(crate) fn select(outputs: Vec<NodeOutput>, stream: Option<OutputStream>) -> Vec<NodeOutput> {
    outputs
        .into_iter()
        .filter(|o| stream.is_none_or(|s| o.stream == s))
        .collect()
}

/// The output as text: each entry's lines (control characters as escapes), the cut marked
/// where it was cut, and a `==> node … <==` header before each entry when there are several
/// (as `tail` heads several files).
pub(crate) fn render(outputs: &[NodeOutput]) -> String {
    let mut out = String::new();
    let headed = outputs.len() > 1;
    for (i, o) in outputs.iter().enumerate() {
        if headed {
            if i > 0 {
                out.push('\n');
            }
            let visit = if o.visit > 1 {
                format!(" (visit {})", o.visit)
            } else {
                String::new()
            };
            out.push_str(&format!(
                "==> {}{visit} {}: {} bytes <==\n",
                UntrustedLines(&o.node_id).to_string().replace('\n', "\\n"),
                o.stream.as_str(),
                thousands(o.total_bytes())
            ));
        }
        if let Some(cut) = o.cut_marker() {
            out.push_str(&cut);
            out.push('\n');
        }
        out.push_str(&UntrustedLines(&o.text).to_string());
        if !o.text.is_empty() && !o.text.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(node: &str, stream: OutputStream, text: &str, cut: u64) -> NodeOutput {
        NodeOutput {
            node_id: node.into(),
            visit: 1,
            stream,
            text: text.into(),
            cut_bytes: cut,
        }
    }

    #[test]
    fn one_entry_prints_bare_and_several_get_headers() {
        let out = entry("detect", OutputStream::Stdout, "{\"ok\": true}", 0);
        assert_eq!(render(std::slice::from_ref(&out)), "{\"ok\": true}\n");
        let err = entry("detect", OutputStream::Stderr, "loading\n", 10);
        let both = render(&[out, err]);
        assert_eq!(
            both,
            "==> detect stdout: 12 bytes <==\n{\"ok\": true}\n\n\
             ==> detect stderr: 18 bytes <==\n\
             [… 10 bytes cut; the last 8 of 18 bytes follow …]\nloading\n"
        );
    }

    #[test]
    fn escapes_and_newlines_in_names_cannot_drive_the_terminal() {
        let hostile = entry(
            "a\nb",
            OutputStream::Stderr,
            "\u{1b}]0;pwned\u{7}\u{1b}[2J",
            0,
        );
        let shown = render(&[hostile.clone(), hostile]);
        assert!(shown.contains("==> a\\nb stderr"), "{shown}");
        assert!(
            !shown.chars().any(|c| c.is_control() && c != '\n'),
            "{shown:?}"
        );
    }

    #[test]
    fn a_stream_can_be_chosen() {
        let all = vec![
            entry("detect", OutputStream::Stdout, "a", 0),
            entry("detect", OutputStream::Stderr, "b", 0),
        ];
        let chosen = select(all, Some(OutputStream::Stderr));
        assert_eq!(chosen.len(), 1);
        assert_eq!(chosen[0].text, "b");
    }
}
