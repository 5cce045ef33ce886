//! Containers as users bring them, checked before anything is written: pyxis's mount flags
//! held to enroot's own table, mounts that would hide the job directory or each other, a
//! relative working directory, the pyxis-only settings under `--container-runtime oci`, and a
//! squashfs image pyxis would take for a registry name. pyxis/enroot cannot run here: each case cites the upstream function whose
//! reading it follows; crun's side runs for real in `oci_e2e`, and here for the order nested
//! mounts are made in (`nested_mounts_are_made_in_order_by_crun`).

use crate::common;

use std::process::Output;

/// A dry run of the tiny CPU recipe with `extra`, its job directory `JOB` under `root`.
fn dry(root: &std::path::Path, extra: &[&str]) -> Output {
    let fx = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let job = root.join("jobs/j1");
    let mut a = vec![
        "submit".to_string(),
        "--dry-run".into(),
        "--recipe".into(),
        format!("{fx}/tiny.yaml"),
        "--gpus".into(),
        "cpux4".into(),
        "--launcher".into(),
        "torchrun".into(),
        "--job-dir".into(),
        job.display().to_string(),
    ];
    a.extend(
        extra
            .iter()
            .map(|s| s.replace("JOB", job.to_str().unwrap())),
    );
    common::command()
        .current_dir(root)
        .args(&a)
        .output()
        .unwrap()
}

fn refused(o: &Output, flag: &str, words: &[&str]) {
    let err = common::stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(&format!("error: {flag}: ")), "{flag}: {err}");
    for w in words {
        assert!(err.contains(w), "{w:?} in\n{err}");
    }
    assert!(err.contains("help:"), "{err}");
}

/// A mount's flags are enroot's words (`bin/enroot-mount.c` `mount_opts`, after pyxis's
/// `+` is read as `,`): a word enroot does not know reaches mount(2) as filesystem data,
/// which a bind mount ignores, so `readonly` (or `ro:z`) would leave the data writable; and
/// `x-detach`/`remount` make enroot do something else than bind the source.
#[test]
fn mount_flags_are_held_to_enroots() {
    let d = tempfile::tempdir().unwrap();
    for flags in [
        "ro",
        "rw",
        "rbind",
        "ro+rprivate",
        "rw+nosuid+nodev",
        "x-create=dir",
        "x-create=file+ro",
        "nofail",
    ] {
        let m = format!("/data:/data:{flags}");
        let o = dry(
            d.path(),
            &[
                "--container-image",
                "nvcr.io#nvidia/nemo:26.04",
                "--container-mount",
                &m,
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{m}: {}", common::stderr(&o));
        assert!(
            common::stdout(&o).contains(&format!(",{m}")),
            "{m} goes to pyxis as given"
        );
    }
    for (flags, why) in [
        ("readonly", "enroot does not know"),
        ("ro:z", "enroot does not know"),
        ("r0", "enroot does not know"),
        ("x-create=auto+bogus", "enroot does not know"),
        ("x-detach", "unmounts"),
        ("remount", "remounts"),
    ] {
        let m = format!("/data:/data:{flags}");
        let o = dry(
            d.path(),
            &[
                "--container-image",
                "nvcr.io#nvidia/nemo:26.04",
                "--container-mount",
                &m,
            ],
        );
        refused(&o, "--container-mount", &[why, "enroot-mount.c"]);
    }
}

/// A mount whose destination is the job directory, holds it, or lies inside it would hide
/// the files the ranks read there (pyxis mounts the user's after the job directory; the OCI
/// bundle replaced the job directory's own mount); the same for the experiment directory.
/// A mount of a directory at its own path (`/lustre:/lustre`) shows the same files and passes.
#[test]
fn a_mount_over_the_job_directory_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let rootfs = d.path().join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    let root = d.path().display().to_string();
    let jobs = format!("{root}/jobs");
    for runtime in [
        vec!["--container-image", "nvcr.io#nvidia/nemo:26.04"],
        vec![
            "--container-runtime",
            "oci",
            "--container-image",
            rootfs.to_str().unwrap(),
        ],
    ] {
        for m in [
            "/scratch:JOB".to_string(),
            "/scratch:JOB/".to_string(),
            format!("/scratch:{jobs}"),
            "/scratch:/".to_string(),
            "/scratch:JOB/code".to_string(),
            format!("/scratch:{jobs}/./j1/../j1"),
        ] {
            let mut a = runtime.clone();
            a.extend(["--container-mount", &m]);
            let o = dry(d.path(), &a);
            refused(&o, "--container-mount", &["job directory"]);
        }
        for m in [format!("{root}:{root}"), "/scratch:/scratch".to_string()] {
            let mut a = runtime.clone();
            a.extend(["--container-mount", &m]);
            let o = dry(d.path(), &a);
            assert_eq!(o.status.code(), Some(0), "{m}: {}", common::stderr(&o));
        }
    }
}

/// The experiment directory a checkpoint path names is mounted too, and held the same way.
#[test]
fn a_mount_over_the_experiment_directory_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let jr = d.path().join("jr");
    let jr = jr.to_str().unwrap();
    let base = [
        "--dry-run",
        "-r",
        "llama8b",
        "-g",
        "h100x8",
        "--jobs-root",
        jr,
        "--container-image",
        "nvcr.io#nvidia/nemo:26.04",
        "--set",
        "checkpoint.save={experiment_dir}/ckpt",
        "--container-mount",
    ];
    let run = |m: &str| {
        let mut a = base.to_vec();
        a.push(m);
        common::command()
            .current_dir(d.path())
            .args(&a)
            .output()
            .unwrap()
    };
    let o = run(&format!("/scratch:{jr}/experiments"));
    refused(
        &o,
        "--container-mount",
        &["experiment directory", "checkpoints"],
    );
    let o = run("/scratch:/scratch");
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
}

/// `--container-runtime oci` has no home-directory mount (pyxis's `--container-mount-home`,
/// `pyxis_slurmstepd.c`): the flag was dropped without a word. And a mount form only pyxis
/// reads (`tmpfs`, enroot's flags) is refused when the runtime is chosen, naming the runtime.
#[test]
fn pyxis_only_settings_are_refused_with_oci() {
    let d = tempfile::tempdir().unwrap();
    let rootfs = d.path().join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    let oci = [
        "--container-runtime",
        "oci",
        "--container-image",
        rootfs.to_str().unwrap(),
    ];
    for flag in ["--container-mount-home", "--no-container-mount-home"] {
        let mut a = oci.to_vec();
        a.push(flag);
        let o = dry(d.path(), &a);
        refused(&o, flag, &["pyxis", "oci"]);
    }
    for m in ["tmpfs:/scratch", "/data:/data:ro+nosuid"] {
        let mut a = oci.to_vec();
        a.extend(["--container-mount", m]);
        let o = dry(d.path(), &a);
        refused(&o, "--container-mount", &["oci"]);
    }
    let mut a = oci.to_vec();
    a.extend(["--container-mount", "/data:/data:ro"]);
    let o = dry(d.path(), &a);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
}

/// pyxis reads an image starting with `/` or `.` as a squashfs file and anything else as a
/// registry name (`pyxis_slurmstepd.c`, `strspn(image, "./")`; `enroot_container_create`
/// prefixes `docker://`): `nemo.sqsh` or `images/nemo.sqsh` would be pulled from a registry.
#[test]
fn a_squashfs_file_pyxis_would_pull_is_refused() {
    let d = tempfile::tempdir().unwrap();
    for image in ["nemo.sqsh", "images/nemo.squashfs", "user@nemo.sqsh"] {
        let o = dry(d.path(), &["--container-image", image]);
        refused(&o, "--container-image", &["registry", "absolute"]);
    }
    for image in [
        "/lustre/images/nemo.sqsh",
        "nvcr.io#nvidia/nemo:26.04",
        "nvcr.io#nvidia/nemo@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "ubuntu",
    ] {
        let o = dry(d.path(), &["--container-image", image]);
        assert_eq!(o.status.code(), Some(0), "{image}: {}", common::stderr(&o));
    }
}

/// A site's OCI bundle keeps its own configuration, but what the user asks for the ranks'
/// container applies to it as to the default one: `--container-workdir` is the process's
/// `cwd` and `--container-readonly` a read-only root (both were dropped without a word).
#[test]
fn a_site_bundle_takes_the_users_workdir_and_read_only_root() {
    let d = tempfile::tempdir().unwrap();
    let bundle = d.path().join("bundle");
    std::fs::create_dir_all(bundle.join("rootfs/bin")).unwrap();
    std::fs::write(
        bundle.join("config.json"),
        r#"{"ociVersion": "1.0.2", "hooks": {"prestart": []},
            "process": {"cwd": "/opt/site", "args": ["/bin/sh"], "env": ["A=1"]},
            "root": {"path": "rootfs", "readonly": false}, "mounts": []}"#,
    )
    .unwrap();
    let fx = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let read = |job: &str, extra: &[&str]| {
        let job = d.path().join(job);
        let o = common::command()
            .current_dir(d.path())
            .args(["render", "-r", &format!("{fx}/tiny.yaml"), "-g", "cpux4"])
            .args(["--launcher", "torchrun", "--container-runtime", "oci"])
            .args(["--container-image", bundle.to_str().unwrap()])
            .args(["--job-dir", job.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
        let text = std::fs::read_to_string(job.join("oci/config.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    let c = read(
        "j1",
        &["--container-workdir", "/work", "--container-readonly"],
    );
    assert_eq!(c["process"]["cwd"], "/work", "{c}");
    assert_eq!(c["root"]["readonly"], true, "{c}");
    assert!(c.get("hooks").is_some(), "the site's settings stay: {c}");
    assert_eq!(c["process"]["env"], serde_json::json!(["A=1"]), "{c}");
    // Without the flags the site's own values stay.
    let c = read("j2", &[]);
    assert_eq!(c["process"]["cwd"], "/opt/site", "{c}");
    assert_eq!(c["root"]["readonly"], false, "{c}");
}

/// `--no-container` with a container flag typed beside it: the flag was dropped without a
/// word (clap refused only `--container-image`); now each is refused, naming it.
#[test]
fn a_container_flag_beside_no_container_is_refused() {
    let d = tempfile::tempdir().unwrap();
    for extra in [
        vec!["--container-mount", "/data:/data"],
        vec!["--container-workdir", "/work"],
        vec!["--container-runtime", "oci"],
        vec!["--container-readonly"],
        vec!["--container-mount-home"],
        vec!["--no-container-mount-home"],
    ] {
        let mut a = vec!["--no-container"];
        a.extend(&extra);
        let o = dry(d.path(), &a);
        refused(&o, extra[0], &["--no-container"]);
    }
    let o = dry(d.path(), &["--no-container"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
}

/// A relative path reaches pyxis as written and is read on the node against the step's
/// working directory, which is the job directory (sbatch runs there): `./data` or
/// `./nemo.sqsh` typed in the directory that holds them named a path under the job
/// directory instead. Refused, with the absolute path to give.
#[test]
fn relative_paths_pyxis_would_read_from_the_job_directory_are_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("data")).unwrap();
    std::fs::write(d.path().join("nemo.sqsh"), b"").unwrap();
    for (flag, extra) in [
        (
            "--container-mount",
            vec![
                "--container-image",
                "nvcr.io#nvidia/nemo:26.04",
                "--container-mount",
                "./data:/data",
            ],
        ),
        (
            "--container-mount",
            vec![
                "--container-image",
                "nvcr.io#nvidia/nemo:26.04",
                "--container-mount",
                "../data:/data:ro",
            ],
        ),
        (
            "--container-image",
            vec!["--container-image", "./nemo.sqsh"],
        ),
        (
            "--container-image",
            vec!["--container-image", "../images/nemo.sqsh"],
        ),
    ] {
        let o = dry(d.path(), &extra);
        refused(&o, flag, &["job directory", "absolute"]);
    }
    // a relative destination is inside the container, read from its root: it passes
    let o = dry(
        d.path(),
        &[
            "--container-image",
            "nvcr.io#nvidia/nemo:26.04",
            "--container-mount",
            "/data:./data",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
}

/// What an image path is decides which runtime can start it, and the refusal says which:
/// an unpacked directory given to pyxis (which reads any path as a squashfs file, `enroot
/// create` failing on the node), and under OCI a path that does not exist, a squashfs file
/// or a registry name (each was "does not look like a root filesystem").
#[test]
fn an_image_the_runtime_cannot_start_is_refused_saying_why() {
    let d = tempfile::tempdir().unwrap();
    let rootfs = d.path().join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    let sqsh = d.path().join("nemo.sqsh");
    std::fs::write(&sqsh, b"hsqs").unwrap();
    let o = dry(d.path(), &["--container-image", rootfs.to_str().unwrap()]);
    refused(
        &o,
        "--container-image",
        &["directory", "--container-runtime oci"],
    );
    let o = dry(d.path(), &["--container-image", sqsh.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let missing = d.path().join("missing");
    for (image, words) in [
        (missing.to_str().unwrap(), vec!["does not exist"]),
        (sqsh.to_str().unwrap(), vec!["is a file", "pyxis"]),
        ("nvcr.io#nvidia/nemo:26.04", vec!["registry", "pyxis"]),
    ] {
        let o = dry(
            d.path(),
            &["--container-runtime", "oci", "--container-image", image],
        );
        refused(&o, "--container-image", &words);
    }
}

/// A read-only mount of a directory at its own path that holds the job directory (a site's
/// `/lustre:/lustre:ro`) leaves the job directory read-only in the container: pyxis mounts it
/// after the job directory's own mount, and Bridge's runner writes its checkpoints and logs
/// there. Refused; the same mount without `ro`, or one beside the job directory, passes.
#[test]
fn a_read_only_mount_holding_the_job_directory_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().display().to_string();
    for m in [
        format!("{root}:{root}:ro"),
        format!("{root}:{root}:nosuid+ro"),
    ] {
        let o = dry(
            d.path(),
            &[
                "--container-image",
                "nvcr.io#nvidia/nemo:26.04",
                "--container-mount",
                &m,
            ],
        );
        refused(&o, "--container-mount", &["read-only", "job directory"]);
    }
    for m in [
        format!("{root}:{root}"),
        format!("{root}:{root}:rw"),
        "/data:/data:ro".to_string(),
    ] {
        let o = dry(
            d.path(),
            &[
                "--container-image",
                "nvcr.io#nvidia/nemo:26.04",
                "--container-mount",
                &m,
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{m}: {}", common::stderr(&o));
    }
}

/// Two mounts at one destination: the later hides the earlier (pyxis has enroot mount both,
/// in order, `add_mount`; an OCI bundle keeps one mount per destination), so the data of the
/// first is not where the user put it. Refused naming both and the flag, exit 2, nothing
/// written; the same mount given twice (a profile's and a flag's) hides nothing and passes.
#[test]
fn two_mounts_at_one_destination_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let image = ["--container-image", "nvcr.io#nvidia/nemo:26.04"];
    for mounts in [
        ["/lustre/a:/data", "/lustre/b:/data/"],
        ["/lustre/a:/data", "/lustre/a:/data:ro"],
        ["/data", "/lustre/b:/data"],
    ] {
        let mut extra = image.to_vec();
        for m in mounts {
            extra.extend(["--container-mount", m]);
        }
        let o = dry(d.path(), &extra);
        refused(
            &o,
            "--container-mount",
            &[
                &format!(
                    "container mounts `{}` (flag --container-mount) and `{}` (flag --container-mount)",
                    mounts[0], mounts[1]
                ),
                "are both mounted at /data: the later hides the earlier",
                "give each mount its own destination",
            ],
        );
    }
    // nothing written by a refused render
    let fx = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let job = d.path().join("rendered");
    let o = common::command()
        .current_dir(d.path())
        .args(["render", "-r", &format!("{fx}/tiny.yaml"), "-g", "cpux4"])
        .args(["--launcher", "torchrun"])
        .args(image)
        .args(["--container-mount", "/a:/x", "--container-mount", "/b:/x"])
        .args(["--job-dir", job.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    assert!(!job.exists(), "a refused render wrote {}", job.display());
    // the same mount twice, and two destinations, pass
    let mut extra = image.to_vec();
    extra.extend(["--container-mount", "/lustre:/lustre"]);
    extra.extend(["--container-mount", "/lustre"]);
    extra.extend(["--container-mount", "/lustre/b:/b"]);
    let o = dry(d.path(), &extra);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
}

/// A mount whose destination holds an earlier one's (`/lustre/data:/data` after
/// `/lustre/data/sub:/data/sub`): mounts are made in order (pyxis has enroot mount them one
/// after the other, `add_mount`; an OCI runtime "MUST mount entries in the listed order"),
/// so the parent hides the child. Refused naming both with where each came from (a flag, a
/// profile's file and line) and the fix, the parent first; given parent first, it passes.
/// (Before: both taken, the child's files not where the user put them.) What real crun does
/// with either order is `nested_mounts_are_made_in_order_by_crun`.
#[test]
fn a_parent_mount_after_its_child_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let image = ["--container-image", "nvcr.io#nvidia/nemo:26.04"];
    let (child, parent) = ("/lustre/data/sub:/data/sub", "/lustre/data:/data/");
    let mut extra = image.to_vec();
    extra.extend(["--container-mount", child, "--container-mount", parent]);
    refused(
        &dry(d.path(), &extra),
        "--container-mount",
        &[
            &format!(
                "container mount `{parent}` (flag --container-mount) is mounted at /data, which holds /data/sub, where `{child}` (flag --container-mount) is mounted before it: the later hides the earlier"
            ),
            &format!(
                "list the parent first (mounts are made in order, so a directory inside another's destination is mounted after it): `{parent}` before `{child}`"
            ),
        ],
    );
    // the child in a profile, the parent a flag: named by the profile's file and line
    let project = d.path().join(".ovlaunch.yaml");
    std::fs::write(
        &project,
        format!("default_profile: x\nprofiles:\n  x:\n    container_mounts:\n      - {child}\n"),
    )
    .unwrap();
    let mut extra = image.to_vec();
    extra.extend(["--container-mount", parent]);
    let o = dry(d.path(), &extra);
    refused(
        &o,
        "--container-mount",
        &[&format!(
            "where `{child}` (profile x ({}:4)) is mounted before it",
            project.display()
        )],
    );
    // the parent in the profile, the child a flag: in order
    std::fs::write(
        &project,
        format!("default_profile: x\nprofiles:\n  x:\n    container_mounts: [{parent}]\n"),
    )
    .unwrap();
    let mut extra = image.to_vec();
    extra.extend(["--container-mount", child]);
    let o = dry(d.path(), &extra);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    std::fs::remove_file(&project).unwrap();
    // parent first, and mounts side by side (/data2 is not inside /data), pass
    let mut extra = image.to_vec();
    extra.extend(["--container-mount", parent, "--container-mount", child]);
    extra.extend(["--container-mount", "/lustre/data2:/data2"]);
    let o = dry(d.path(), &extra);
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
}

/// The order `a_parent_mount_after_its_child_is_refused` asks for, run by real crun: a job
/// rendered with `--container-runtime oci` and the parent mount first, its bundle run by
/// crun with the step's command put in as Slurm puts it (`process.args`), sees the child's
/// files at the child's destination; the same bundle with the two mounts the other way round
/// (the refused order) sees an empty directory there: the parent hid the child. Needs root
/// and crun (`.ci/install.sh oci`); elsewhere skipped, saying so.
#[test]
fn nested_mounts_are_made_in_order_by_crun() {
    let test = "nested_mounts_are_made_in_order_by_crun";
    if !crate::shared_cluster::root_or_skip(test) {
        return;
    }
    if which::which("crun").is_err() {
        assert!(
            !common::slurm_required(),
            "{test} needs crun (.ci/install.sh oci)"
        );
        eprintln!("skipped {test}: needs crun (.ci/install.sh oci)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let at = |rel: &str| d.path().join(rel);
    let rootfs = at("rootfs");
    for dir in ["bin", "proc", "dev", "sys", "tmp", "data"] {
        std::fs::create_dir_all(rootfs.join(dir)).unwrap();
    }
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/sh")).unwrap();
    std::fs::create_dir_all(at("data/sub")).unwrap();
    std::fs::write(at("data/parent.txt"), "p").unwrap();
    std::fs::create_dir_all(at("child")).unwrap();
    std::fs::write(at("child/child.txt"), "c").unwrap();
    let (parent, child) = (
        format!("{}:/data", at("data").display()),
        format!("{}:/data/sub", at("child").display()),
    );
    let fx = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let job = at("job");
    let o = common::command()
        .current_dir(d.path())
        .args(["render", "-r", &format!("{fx}/tiny.yaml"), "-g", "cpux4"])
        .args(["--launcher", "torchrun", "--container-runtime", "oci"])
        .args(["--container-image", rootfs.to_str().unwrap()])
        .args(["--container-mount", &parent, "--container-mount", &child])
        .args(["--job-dir", job.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let config = job.join("oci/config.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    c["process"]["args"] = serde_json::json!(["/bin/sh", "-c", "ls /data /data/sub"]);
    // crun as the CI's Slurm runs it (.ci/slurm-up.sh): without the cgroup v2 mount of a
    // hybrid host, no cgroups managed
    let run = |c: &serde_json::Value, id: &str| {
        std::fs::write(&config, c.to_string()).unwrap();
        let o = std::process::Command::new("unshare")
            .args(["-m", "sh", "-c"])
            .arg("umount -l /sys/fs/cgroup/unified 2>/dev/null; exec crun --root=\"$0\" --cgroup-manager=disabled run --bundle \"$1\" \"$2\"")
            .args([at("crun").as_os_str(), job.join("oci").as_os_str(), id.as_ref()])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
        common::stdout(&o)
    };
    let seen = run(&c, "in-order");
    assert!(
        seen.contains("parent.txt") && seen.contains("child.txt"),
        "{seen}"
    );
    let mounts = c["mounts"].as_array_mut().unwrap();
    let n = mounts.len();
    assert_eq!(mounts[n - 1]["destination"], "/data/sub");
    mounts.swap(n - 1, n - 2);
    let seen = run(&c, "child-first");
    assert!(
        seen.contains("parent.txt") && !seen.contains("child.txt"),
        "the parent mounted last hides the child: {seen}"
    );
}

/// A relative `--container-workdir`: pyxis changes into it from the container's root after
/// joining its mount namespace (`pyxis_slurmstepd.c`, `slurm_spank_task_init_privileged`),
/// so `work` typed here is `/work` there, not a directory under this one or the job
/// directory; an OCI bundle's `process.cwd` must be absolute. Refused under both runtimes,
/// naming the flag and the absolute form; an absolute one passes.
#[test]
fn a_relative_container_workdir_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("rootfs");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    let oci = ["--container-runtime", "oci", "--container-image"];
    for w in ["work", "./work", "../work", ""] {
        for runtime in [
            vec!["--container-image", "nvcr.io#nvidia/nemo:26.04"],
            oci.iter()
                .copied()
                .chain([root.to_str().unwrap()])
                .collect(),
        ] {
            let mut extra = runtime.clone();
            extra.extend(["--container-workdir", w]);
            let o = dry(d.path(), &extra);
            refused(
                &o,
                "--container-workdir",
                &[
                    &format!("container working directory `{w}` is not an absolute path"),
                    "from its root",
                    "--container-workdir /workspace",
                ],
            );
        }
    }
    let o = dry(
        d.path(),
        &[
            "--container-image",
            "nvcr.io#nvidia/nemo:26.04",
            "--container-workdir",
            "/workspace",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
}
