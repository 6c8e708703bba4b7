//! The `branch-rules-claim` function alone: on AWS Lambda, or as a local route.

fn main() -> std::process::ExitCode {
    res_functions::serve::function_main(&[
        res_functions::Function::Claim,
        res_functions::Function::ClaimBatch,
    ])
}
