//! The report's `output`: what the run's programs printed, checked before anything is
//! written.

use res_shared::wire::ErrorCode;
use res_shared::wire::{MAX_OUTPUT_BYTES, MAX_REPORT_OUTPUT_BYTES, MAX_REPORT_OUTPUTS, NodeOutput};

use crate::api::require_text;
use crate::error::ApiError;

/// Every entry within the limits a runner keeps to, the field that is not named.
pub(super) fn check_output(outputs: &[NodeOutput]) -> Result<(), ApiError> {
    let refuse = |message: String| Err(ApiError::unprocessable(ErrorCode::InvalidField, message));
    if outputs.len() > MAX_REPORT_OUTPUTS {
        return refuse(format!(
            "output must have at most {MAX_REPORT_OUTPUTS} entries, got {}",
            outputs.len()
        ));
    }
    let mut total = 0;
    for (i, output) in outputs.iter().enumerate() {
        require_text(&format!("output[{i}].node_id"), &output.node_id, 200)?;
        if output.visit == 0 || i32::try_from(output.visit).is_err() {
            return refuse(format!(
                "output[{i}].visit must be between 1 and {}",
                i32::MAX
            ));
        }
        if output.text.len() > MAX_OUTPUT_BYTES {
            return refuse(format!(
                "output[{i}].text must be at most {MAX_OUTPUT_BYTES} bytes, got {}",
                output.text.len()
            ));
        }
        // PostgreSQL's text cannot hold NUL; a runner writes it as U+FFFD.
        if output.text.contains('\0') {
            return refuse(format!(
                "output[{i}].text must not contain the NUL character (\\u0000)"
            ));
        }
        if i64::try_from(output.cut_bytes).is_err() {
            return refuse(format!(
                "output[{i}].cut_bytes must be at most {}",
                i64::MAX
            ));
        }
        total += output.text.len();
    }
    if total > MAX_REPORT_OUTPUT_BYTES {
        return refuse(format!(
            "output must have at most {MAX_REPORT_OUTPUT_BYTES} bytes of text in all, got {total}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use res_shared::wire::OutputStream;

    use super::*;

    fn entry(text: &str) -> NodeOutput {
        NodeOutput {
            node_id: "detect".into(),
            visit: 1,
            stream: OutputStream::Stderr,
            text: text.into(),
            cut_bytes: 0,
        }
    }

    fn refusal(outputs: &[NodeOutput]) -> String {
        match check_output(outputs) {
            Err(error) => error.to_string(),
            Ok(()) => String::from("accepted"),
        }
    }

    #[test]
    fn a_runners_output_is_accepted() {
        let full = entry(&"x".repeat(MAX_OUTPUT_BYTES));
        let most = vec![full; MAX_REPORT_OUTPUT_BYTES / MAX_OUTPUT_BYTES];
        assert!(check_output(&most).is_ok());
        assert!(check_output(&[]).is_ok());
        assert!(
            check_output(&[entry("")]).is_ok(),
            "an empty text is a valid tail"
        );
    }

    #[test]
    fn each_refusal_names_the_field() {
        let mut nameless = entry("x");
        nameless.node_id = " ".into();
        assert!(refusal(&[entry("ok"), nameless]).contains("output[1].node_id"));
        let mut zero = entry("x");
        zero.visit = 0;
        assert!(refusal(&[zero]).contains("output[0].visit"));
        let long = entry(&"x".repeat(MAX_OUTPUT_BYTES + 1));
        assert!(refusal(&[long]).contains("output[0].text must be at most 65536 bytes"));
        assert!(refusal(&[entry("a\0b")]).contains("output[0].text must not contain the NUL"));
        let mut huge_cut = entry("x");
        huge_cut.cut_bytes = u64::MAX;
        assert!(refusal(&[huge_cut]).contains("output[0].cut_bytes"));
        let many = vec![entry("x"); MAX_REPORT_OUTPUTS + 1];
        assert!(refusal(&many).contains("at most 64 entries"));
        let full = entry(&"x".repeat(MAX_OUTPUT_BYTES));
        let too_much = vec![full; MAX_REPORT_OUTPUT_BYTES / MAX_OUTPUT_BYTES + 1];
        assert!(refusal(&too_much).contains("bytes of text in all"));
    }
}
