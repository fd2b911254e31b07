//! `resize-guard-controller`: see the library documentation. `resize-guard-controller probe`
//! sends the admission probe instead (`resize_guard_controller::admission_probe::once`).

use std::process::ExitCode;

use clap::Parser;
use resize_guard_controller::args::{Args, Command};

fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    resize_guard_runtime::process::init(&args.common.log_format);
    match args.command.clone() {
        Some(Command::Probe(once)) => resize_guard_runtime::process::block_on(
            resize_guard_controller::run::probe(args, once.wait),
        ),
        None => resize_guard_runtime::process::block_on(resize_guard_controller::run::run(args))
            .map(|()| ExitCode::SUCCESS),
    }
}
