//! `ovlaunch-rank`: thin shim over [`ovlaunch_rank::main_with_args`] (all logic lives there).

fn main() {
    std::process::exit(ovlaunch_rank::main_with_args(std::env::args_os().skip(1)));
}
