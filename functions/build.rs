// `sqlx::migrate!` embeds ../migrations at compile time, but cargo does not know the
// directory is an input: without this, a new migration is left out of the binary until some
// source file of the crate changes.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
