//! The `branch-rules-set-next-run-time` function alone: on AWS Lambda, or as a local route.

fn main() -> std::process::ExitCode {
    res_functions::serve::function_main(&[
        res_functions::Function::SetNextRunTime,
        res_functions::Function::SetNextRunTimeBatch,
    ])
}
