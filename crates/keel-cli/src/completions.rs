//! `keel completions SHELL`: the completion script clap generates from the command tree.

use crate::{CompletionsArgs, exit};

pub fn execute(args: CompletionsArgs, mut command: clap::Command) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut command, "keel", &mut out);
    Ok(exit::COMPLETED)
}
