//! `tidewater`: see `tidewater --help` and `docs/running.md`.

fn main() {
    std::process::exit(tidewater::cli::main());
}
