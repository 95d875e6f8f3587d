//! Renders the report of one run directory, and the index of its store when asked:
//! `cargo run -p tidewater-reports --example render -- RUN_DIR [STORE_DIR]`. For working on
//! the reports without building the harness.

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(run_dir) = args.next() else {
        eprintln!("usage: render RUN_DIR [STORE_DIR]");
        std::process::exit(2);
    };
    match tidewater_reports::render_run(std::path::Path::new(&run_dir)) {
        Ok(path) => println!("report: {}", path.display()),
        Err(e) => {
            eprintln!("render: {e}");
            std::process::exit(1);
        }
    }
    if let Some(store) = args.next() {
        match tidewater_reports::render_index(std::path::Path::new(&store)) {
            Ok(path) => println!("index: {}", path.display()),
            Err(e) => {
                eprintln!("index: {e}");
                std::process::exit(1);
            }
        }
    }
}
