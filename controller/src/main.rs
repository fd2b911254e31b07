//! `resize-guard-controller`: see the library documentation.

use clap::Parser;
use resize_guard_controller::args::Args;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    resize_guard_runtime::process::init(&args.common.log_format);
    resize_guard_runtime::process::block_on(resize_guard_controller::run::run(args))
}
