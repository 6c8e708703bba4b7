//! The operator console (`/console/`) as one binary: on AWS Lambda behind the same HTTP API
//! as the functions, or as local routes.

fn main() -> std::process::ExitCode {
    res_functions::serve::console_main()
}
