//! The `executions-heartbeat` function alone: on AWS Lambda, or as a local route.

fn main() -> std::process::ExitCode {
    res_functions::serve::function_main(&[
        res_functions::Function::Heartbeat,
        res_functions::Function::HeartbeatBatch,
    ])
}
