//! The operator functions (run now, pause, resume, force-stop, cancel, history) as one
//! binary: on AWS Lambda, or as local routes.

fn main() -> std::process::ExitCode {
    res_functions::serve::function_main(res_functions::Function::OPERATOR)
}
