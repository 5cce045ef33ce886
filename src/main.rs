//! The `ovlaunch` binary: all logic is in the library.

fn main() {
    std::process::exit(ovlaunch::cli::run());
}
