//! `ovlaunch-rank`: thin shim over [`ovlaunch::rank::main_with_args`] (all logic lives there).

fn main() {
    std::process::exit(ovlaunch::rank::main_with_args(std::env::args_os().skip(1)));
}
