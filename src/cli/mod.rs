//! The command line: one file per subcommand, all thin. Each reads files or talks to the
//! outside world only through `load` (catalog and user files) and the backends, then
//! calls the pure core and prints.

mod cancel;
mod completions;
mod env;
mod estimate;
mod explain;
mod fields;
mod jobs;
mod launch;
mod list;
pub mod load;
mod logs;
mod output;
mod package;
mod plan;
mod plugins;
pub mod profile;
mod profiles;
mod recipes;
mod scripts;
pub mod settings;
mod status;
mod submit;
mod torchrun;
mod tune;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::{Error, Result};
pub use crate::printer::Printer;

/// Launch Megatron-Bridge training on Slurm with exact, explained overlap settings.
#[derive(Debug, Parser)]
#[command(
    name = "ovlaunch",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "Exit codes: 0 success, 1 runtime failure (I/O, Slurm), 2 usage or config error.\n\nExample: ovlaunch --recipe llama70b --gpus h100x64 --dry-run"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub launch: MainArgs,
}

/// The main form and `submit`: resolve, render and (without --dry-run) submit.
#[derive(Debug, Args)]
pub struct MainArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    #[command(flatten)]
    pub launch: launch::LaunchArgs,
    /// Print the launch script on stdout (sbatch accepts it as is) and the plan summary and env
    /// on stderr; write and submit nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also print every decision (plan and launch, each launch setting with its origin: flag,
    /// env, profile file:line or default) on stderr.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub output: output::OutputArg,
}

// Parsed once per process; boxing the larger variants would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the resolved plan (YAML or JSON).
    Plan(PlanCmd),
    /// Print the runner call and its Hydra overrides (what differs from Bridge's recipe).
    Overrides {
        #[command(flatten)]
        plan: PlanArgs,
        /// The site profile whose Bridge root and version the runner call uses (also
        /// OVLAUNCH_PROFILE).
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// List the shipped and user recipes.
    Recipes(RecipesCmd),
    /// List the userbuffers presets.
    Presets(output::OutputArg),
    /// List the fields a section accepts.
    Fields {
        /// A section `--set` takes (model, optimizer, checkpoint, dataset, peft, ...; an
        /// unknown one gets the list); without one, every section
        section: Option<String>,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// List the GPU kinds.
    Gpus {
        #[command(flatten)]
        catalog: CatalogArgs,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// List the plugins with their options, defaults and help.
    Plugins {
        #[command(flatten)]
        sources: PluginSourceArgs,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// Write the job directory and submit it (or run it with --executor local); `submit DIR`
    /// submits a directory `render` wrote.
    Submit(SubmitCmd),
    /// Write the complete job directory without submitting it; print its path.
    Render {
        #[command(flatten)]
        plan: PlanArgs,
        #[command(flatten)]
        launch: launch::LaunchArgs,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// Write the job directory and print the torchrun script that runs it: on this machine,
    /// or on every machine of a multi-node run without Slurm (`--master-addr HOST`).
    Torchrun {
        #[command(flatten)]
        plan: PlanArgs,
        #[command(flatten)]
        launch: launch::LaunchArgs,
        /// The c10d rendezvous host for a multi-node run.
        #[arg(long)]
        master_addr: Option<String>,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// Dump the launch environment (secrets redacted).
    Env {
        #[command(flatten)]
        plan: PlanArgs,
        /// Output format: shell exports, a dotenv file, or JSON.
        #[arg(long, short = 'o', visible_alias = "output", value_enum, default_value_t = env::FormatArg::Sh)]
        format: env::FormatArg,
        /// The site profile whose env joins the launch environment (also OVLAUNCH_PROFILE).
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
    },
    /// Show a job's state.
    #[command(
        after_help = "Exit codes: 0 succeeded, pending or running; 3 failed (also timeout, node failure, preemption); 4 cancelled; 5 state unknown; 1 the state could not be read."
    )]
    Status {
        #[command(flatten)]
        job: jobs::JobArgs,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// Print a job's output.
    #[command(
        after_help = "Exit codes: 0 the output was printed; with --follow, the job's final state as `status` gives it (3 failed, 4 cancelled, 5 unknown), after a last line on stderr with the state and exit code."
    )]
    Logs {
        #[command(flatten)]
        job: jobs::JobArgs,
        /// Keep printing new output until the job ends.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Only the lines of this Slurm task (the rank with --launcher srun, the node with
        /// --launcher torchrun).
        #[arg(long, value_name = "N")]
        rank: Option<u32>,
        /// Output format: the lines as printed, or JSON Lines (one {"task", "text"} object
        /// per line).
        #[arg(long, short = 'o', value_enum, default_value_t = output::Format::Text)]
        output: output::Format,
    },
    /// Cancel a job (with --signal: signal its running step instead).
    Cancel {
        #[command(flatten)]
        job: jobs::JobArgs,
        /// Send this signal (a name such as USR1 or SIGUSR1, or a number) to the job's
        /// running step instead of cancelling it, as `scancel --signal` does (a run on this
        /// machine: to its torchrun): a trainer that saves a checkpoint on it can be asked to.
        #[arg(long, short = 's', value_name = "SIGNAL", value_parser = cancel::parse_signal)]
        signal: Option<nix::sys::signal::Signal>,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// The rank runtime: set this rank's identity, env and CPU placement, then exec the
    /// trainer (`ovlaunch rank [--plan FILE] [--strict] [--print-identity] -- TRAINER...`).
    #[command(disable_help_flag = true)]
    Rank {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Predict step time, tokens/s, MFU and memory per GPU for the plan, before a GPU is spent.
    Estimate(estimate::EstimateCmd),
    /// Rank every valid layout by predicted throughput; print the best with their commands.
    Tune(tune::TuneCmd),
    /// Print a shell completion script: `ovlaunch completions bash > /etc/bash_completion.d/ovlaunch`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `ovlaunch man | man -l -`.
    Man,
    /// Names for shell completion, one per line.
    #[command(hide = true)]
    Names {
        /// Which names.
        #[arg(value_enum)]
        kind: completions::NameKind,
    },
    /// Show the site profiles: the files found, the profile in force, and every launch
    /// setting with its value and origin (flag, env, profile file:line, default).
    Profiles {
        /// The profile to show (also OVLAUNCH_PROFILE; default: the files' default_profile).
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        #[command(flatten)]
        output: output::OutputArg,
    },
    /// List the jobs under the jobs root, rendered and submitted: name, id, state, submit
    /// time, GPUs, recipe and directory; with --host (or a profile's host), also those under
    /// the login node's jobs root.
    List {
        #[command(flatten)]
        place: jobs::PlaceArgs,
        #[command(flatten)]
        output: output::OutputArg,
    },
}

/// `ovlaunch submit [DIR]`.
#[derive(Debug, Args)]
pub struct SubmitCmd {
    /// A job directory written by `ovlaunch render`: submit it as it is (with its own
    /// executor) instead of planning a new one.
    #[arg(value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub main: MainArgs,
}

/// Flags that choose and adjust a plan.
#[derive(Debug, Args, Clone)]
pub struct PlanArgs {
    /// Recipe name or alias, a Bridge recipe function, its short name
    /// (llama3_70b_sft_h100_bf16: `ovlaunch recipes -v`), or a recipe YAML file (required).
    #[arg(long, short = 'r')]
    pub recipe: Option<String>,
    /// Hardware as KINDxCOUNT: h100x64, b200x128, gb200x72, cpux4 (required).
    #[arg(long, short = 'g')]
    pub gpus: Option<String>,
    /// bf16, fp8cs, fp8mx, fp8ds, fp8sc or nvfp4 (default: bf16 where the recipe has it).
    #[arg(long)]
    pub precision: Option<String>,
    /// Bridge's config variant of the recipe (e.g. large_scale); v1/v2 mean none.
    #[arg(long)]
    pub variant: Option<String>,
    /// Override a ConfigContainer field: section.field=value (repeatable).
    #[arg(long = "set", value_name = "SECTION.FIELD=VALUE")]
    pub sets: Vec<String>,
    /// Set a launch environment variable, beating recipe and derived values (repeatable);
    /// `--env NAME` passes ovlaunch's own value of NAME (keeps secrets off the command line).
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    pub envs: Vec<String>,
    /// Remove a variable from the trainer's environment, also one the container image or
    /// the site sets (repeatable).
    #[arg(long = "unset", value_name = "NAME")]
    pub unsets: Vec<String>,
    /// Transformer Engine version in the container, or `none`.
    #[arg(long, value_name = "VERSION|none", default_value = crate::version::DEFAULT_TE)]
    pub te_version: String,
    /// PyTorch version in the container.
    #[arg(long, value_name = "VERSION", default_value = crate::version::DEFAULT_TORCH)]
    pub torch_version: String,
    /// Megatron-Bridge version in the container; a recipe newer than it is refused.
    #[arg(long, value_name = "VERSION", default_value = crate::version::DEFAULT_BRIDGE)]
    pub bridge_version: String,
    /// Megatron-Bridge checkout in the container (its scripts/training/run_recipe.py is the trainer).
    #[arg(long, value_name = "DIR", default_value = crate::version::DEFAULT_BRIDGE_ROOT)]
    pub bridge_root: String,
    /// Turn every silent disable (e.g. TP overlap with TP=1) into an error.
    #[arg(long)]
    pub strict: bool,
    /// Override the GPU kind's GPUs per node.
    #[arg(long)]
    pub gpus_per_node: Option<u32>,
    /// The config.json (or its directory) of the Hugging Face checkpoint a recipe function
    /// builds its model from, when ovlaunch does not hold it; without it the Hugging Face cache
    /// is looked in (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub).
    #[arg(long, value_name = "PATH")]
    pub hf_config: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub catalog: CatalogArgs,
    /// Enable a plugin, with options (repeatable): --plugin
    /// nsys:profile_step_start=20,profile_step_end=30
    #[arg(long = "plugin", value_name = "NAME[:KEY=VALUE,...]")]
    pub plugin_specs: Vec<String>,
    #[command(flatten)]
    pub plugin_sources: PluginSourceArgs,
}

/// Where user plugin files come from.
#[derive(Debug, Args, Clone, Default)]
pub struct PluginSourceArgs {
    /// A plugin YAML file (repeatable); it replaces a shipped plugin of the same name.
    #[arg(long = "plugin-file", value_name = "FILE")]
    pub plugin_file: Vec<std::path::PathBuf>,
    /// A directory of plugin YAML files (also OVLAUNCH_PLUGIN_DIR).
    #[arg(long, value_name = "DIR")]
    pub plugin_dir: Option<std::path::PathBuf>,
}

/// Where user data files come from.
#[derive(Debug, Args, Clone, Default)]
pub struct CatalogArgs {
    /// A directory of user recipes (also OVLAUNCH_RECIPE_DIR).
    #[arg(long, value_name = "DIR")]
    pub recipe_dir: Option<std::path::PathBuf>,
    /// A YAML file of extra or replacement GPU kinds (also OVLAUNCH_HARDWARE_FILE).
    #[arg(long, value_name = "FILE")]
    pub hardware_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct PlanCmd {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
    /// Show each decision: key, value, rule and source; then the launch decisions (the
    /// plugins' launch phase, sbatch rules) and every launch setting with its origin, for
    /// the profile's settings and the defaults (`ovlaunch ... --dry-run --explain` shows them
    /// for the launch flags given).
    #[arg(long)]
    pub explain: bool,
    /// The site profile: its env and Bridge root and version shape the plan (also
    /// OVLAUNCH_PROFILE; profiles live in .ovlaunch.yaml and ~/.config/ovlaunch/config.yaml).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
}

#[derive(Debug, Args)]
pub struct RecipesCmd {
    /// Only recipes whose name, aliases, description or Bridge functions hold every word
    /// (case, `-`, `_` and `.` aside: `ovlaunch recipes llama 70b sft`).
    #[arg(value_name = "WORDS")]
    pub words: Vec<String>,
    #[command(flatten)]
    pub catalog: CatalogArgs,
    /// Also list each recipe's variants (JSON always lists them).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Only recipes of this family (`llama`, `qwen`, `nemotronh`, ...).
    #[arg(long)]
    pub family: Option<String>,
    /// Only recipes of this task: pretrain, sft or peft.
    #[arg(long, value_parser = ["pretrain", "sft", "peft"], ignore_case = true)]
    pub task: Option<String>,
    /// Only recipes that run on this GPU kind: a variant written for it, or a library recipe
    /// (which runs on any).
    #[arg(long)]
    pub gpu: Option<String>,
    #[command(flatten)]
    pub output: output::OutputArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Yaml,
    Json,
}

impl PlanArgs {
    /// The plan flags typed on the command line, as their long flags and values (`-r X` is
    /// `--recipe X`), in this struct's order, each repeated flag in the order typed: the
    /// command line that asks for the same plan (`tune` prints its commands with it).
    /// `matches` are the parsed arguments of a command that flattens `PlanArgs`.
    pub fn typed(matches: &clap::ArgMatches) -> Vec<String> {
        let cmd = <PlanArgs as Args>::augment_args(clap::Command::new("plan"));
        let mut words = Vec::new();
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            let (Some(long), Some(clap::parser::ValueSource::CommandLine)) =
                (arg.get_long(), matches.value_source(id))
            else {
                continue;
            };
            if !arg.get_action().takes_values() {
                words.push(format!("--{long}"));
                continue;
            }
            for occurrence in matches.get_raw_occurrences(id).into_iter().flatten() {
                words.push(format!("--{long}"));
                words.extend(occurrence.map(|v| v.to_string_lossy().into_owned()));
            }
        }
        words
    }

    /// `--recipe`, which every plan needs.
    pub fn recipe(&self) -> Result<&str> {
        self.recipe.as_deref().ok_or_else(|| {
            Error::usage("a recipe is required")
                .at_flag("--recipe")
                .help("name a recipe (`ovlaunch recipes` lists them) or a recipe file")
        })
    }

    /// `--gpus`, which every plan needs.
    pub fn gpus(&self) -> Result<&str> {
        self.gpus.as_deref().ok_or_else(|| {
            Error::usage("a GPU spec is required")
                .at_flag("--gpus")
                .help("e.g. --gpus h100x64")
        })
    }
}

/// Parses the command line and runs it; returns the process exit code.
pub fn run() -> i32 {
    // `ovlaunch rank ...` is the rank runtime itself, with its own tiny argument parser
    // and env(1)-style exit codes; it must not pay for clap or the catalog.
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == "rank") {
        return crate::rank::main_with_args(args);
    }
    // Every argument ends up as text (scripts, records, the reproduce line); one that is not
    // UTF-8 is refused here, once, instead of being converted lossily (another path) later.
    for (i, a) in std::env::args_os().enumerate().skip(1) {
        if let Err(e) = crate::input::utf8(&a, &format!("argument {i}")) {
            Printer::new().error(&e);
            return e.exit_code();
        }
    }
    let parsed = <Cli as clap::CommandFactory>::command()
        .try_get_matches()
        .and_then(|m| {
            // Which flags were typed: a profile fills in only what no flag set.
            let given = settings::Given::from_matches(&m);
            <Cli as clap::FromArgMatches>::from_arg_matches(&m).map(|cli| (cli, given, m))
        });
    let (cli, given, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) if unknown_command().is_some() => {
            let e = unknown_command().unwrap_or_else(|| Error::usage(e.to_string()));
            Printer::new().error(&e);
            return e.exit_code();
        }
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let p = Printer::new();
    match dispatch(&p, cli, &given, &matches) {
        Ok(code) => code,
        Err(e) => {
            p.error(&e);
            e.exit_code()
        }
    }
}

/// The main form takes only flags: a first argument that is a word but no command is a
/// mistyped command (`ovlaunch plna`), answered with the closest commands.
fn unknown_command() -> Option<Error> {
    let word = std::env::args().nth(1)?;
    if word.starts_with('-') || word.is_empty() {
        return None;
    }
    let cmd = <Cli as clap::CommandFactory>::command();
    let names: Vec<String> = cmd
        .get_subcommands()
        .flat_map(|c| {
            std::iter::once(c.get_name().to_string()).chain(c.get_all_aliases().map(str::to_string))
        })
        .chain(["help".to_string()])
        .collect();
    if names.contains(&word) {
        return None;
    }
    Some(
        Error::usage(format!("unknown command `{}`", word.escape_debug()))
            .at_flag("COMMAND")
            .help(crate::error::did_you_mean_then(
                &word,
                names.iter().map(String::as_str),
                "(`ovlaunch --help` lists the commands; the main form takes only flags: ovlaunch --recipe R --gpus G)",
            )),
    )
}

/// Runs the parsed command; `given` are the flags typed, `matches` the parsed arguments.
fn dispatch(
    p: &Printer,
    cli: Cli,
    given: &settings::Given,
    matches: &clap::ArgMatches,
) -> Result<i32> {
    match (cli.command, cli.launch) {
        (Some(Command::Plan(cmd)), _) => plan::plan(p, &cmd, given),
        (
            Some(Command::Overrides {
                plan,
                profile,
                output,
            }),
            _,
        ) => plan::overrides(p, &plan, profile, given, output),
        (Some(Command::Recipes(cmd)), _) => recipes::list(p, &cmd),
        (Some(Command::Presets(output)), _) => recipes::presets(p, output),
        (Some(Command::Fields { section, output }), _) => {
            fields::list(p, section.as_deref(), output)
        }
        (Some(Command::Gpus { catalog, output }), _) => recipes::gpus(p, &catalog, output),
        (Some(Command::Plugins { sources, output }), _) => plugins::list(p, &sources, output),
        (
            Some(Command::Render {
                plan,
                launch,
                output,
            }),
            _,
        ) => submit::render(p, &plan, &launch, given, output),
        (
            Some(Command::Env {
                plan,
                format,
                profile,
            }),
            _,
        ) => env::run(p, &plan, profile, given, format),
        (
            Some(Command::Torchrun {
                plan,
                launch,
                master_addr,
                output,
            }),
            _,
        ) => torchrun::run(p, &plan, &launch, master_addr.as_deref(), given, output),
        (Some(Command::Completions { shell }), _) => {
            p.data(&completions::script(shell)?)?;
            Ok(0)
        }
        (Some(Command::Names { kind }), _) => completions::names(p, kind),
        (Some(Command::Man), _) => {
            let cmd = <Cli as clap::CommandFactory>::command();
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut buf)
                .map_err(|e| Error::runtime(format!("cannot render the man page: {e}")))?;
            p.data(&String::from_utf8_lossy(&buf))?;
            Ok(0)
        }
        (Some(Command::Status { job, output }), _) => status::run(p, &job, output),
        (Some(Command::Profiles { profile, output }), _) => profiles::run(p, profile, output),
        (
            Some(Command::Logs {
                job,
                follow,
                rank,
                output,
            }),
            _,
        ) => logs::run(p, &job, follow, rank, output),
        (
            Some(Command::Cancel {
                job,
                signal,
                output,
            }),
            _,
        ) => cancel::run(p, &job, signal, output),
        (Some(Command::Estimate(cmd)), _) => estimate::run(p, &cmd),
        (Some(Command::Tune(cmd)), _) => {
            let m = matches.subcommand_matches("tune").unwrap_or(matches);
            tune::run(p, &cmd, m)
        }
        (Some(Command::Rank { args }), _) => Ok(crate::rank::main_with_args(
            args.into_iter().map(std::ffi::OsString::from),
        )),
        (Some(Command::List { place, output }), _) => list::run(p, &place.place()?, output),
        (
            Some(Command::Submit(SubmitCmd {
                dir: Some(dir),
                main,
            })),
            _,
        ) => submit::rendered(p, &dir, &main, given),
        (Some(Command::Submit(SubmitCmd { dir: None, main })), _) | (None, main) => submit::run(
            p,
            &main.plan,
            &main.launch,
            given,
            main.dry_run,
            main.explain,
            main.output,
        ),
    }
}
