//! `ovlaunch logs JOB [--follow]`: the job's Slurm output file; with `--follow`, new output
//! as it arrives until the job reaches a final state.

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use super::jobs::JobArgs;
use super::out;
use crate::backend::{record, slurm};
use crate::error::{Error, Result};

pub fn run(args: &JobArgs, follow: bool) -> Result<i32> {
    let (dir, mut rec) = record::find(&args.root(), &args.job)?;
    let Some(id) = super::status::slurm_id(&dir, &mut rec)? else {
        return Err(Error::usage(format!(
            "job {} ran locally; its output went to the terminal",
            rec.job_name
        )));
    };
    let path = dir.join(format!("slurm-{id}.out"));
    let mut pos = 0u64;
    loop {
        if let Ok(mut f) = std::fs::File::open(&path) {
            f.seek(SeekFrom::Start(pos))
                .map_err(|e| Error::runtime(e.to_string()))?;
            let mut buf = Vec::new();
            f.read_to_end(&mut buf)
                .map_err(|e| Error::runtime(e.to_string()))?;
            pos += buf.len() as u64;
            out(&String::from_utf8_lossy(&buf))?;
        } else if !follow {
            return Err(
                Error::runtime(format!("no output yet at {}", path.display()))
                    .help("the job may still be pending; try --follow"),
            );
        }
        if !follow {
            return Ok(0);
        }
        // A controller that stops answering, a forgotten job or a reused id ends the
        // loop with an error instead of polling forever.
        if slurm::status(&id, &super::status::expected(&rec))?
            .phase
            .is_final()
        {
            // One last read after the final state, then stop.
            if let Ok(mut f) = std::fs::File::open(&path) {
                let _ = f.seek(SeekFrom::Start(pos));
                let mut buf = Vec::new();
                let _ = f.read_to_end(&mut buf);
                out(&String::from_utf8_lossy(&buf))?;
            }
            return Ok(0);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
