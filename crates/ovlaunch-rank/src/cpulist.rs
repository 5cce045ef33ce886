//! CPU lists in the kernel's format (`0-3,8,10-11`, as in `/sys/devices/system/node/node0/cpulist`
//! and `/proc/self/status`'s `Cpus_allowed_list`).
//!
//! Contract: [`parse_cpulist`] returns a sorted, de-duplicated `Vec<usize>` or an error naming
//! the bad item; [`format_cpulist`] is its inverse with runs collapsed to ranges. Both
//! [`crate::sysfs`] (reading) and [`crate::affinity`] (deciding) use this leaf module, so
//! neither imports the other.

/// Largest CPU id accepted by the parser (guards against absurd ranges in corrupt input).
pub const MAX_CPU_ID: usize = 1 << 16;

/// Parse `0-3,8,10-11` (blanks around items and a trailing newline are tolerated; the empty
/// string is the empty set).
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>, String> {
    let text = text.trim();
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Ok(cpus);
    }
    for item in text.split(',') {
        let item = item.trim();
        let num = |s: &str| -> Result<usize, String> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("'{item}' is not a CPU number or LO-HI range"));
            }
            match s.parse::<usize>() {
                Ok(n) if n <= MAX_CPU_ID => Ok(n),
                _ => Err(format!("CPU id '{s}' is larger than {MAX_CPU_ID}")),
            }
        };
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(item)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(format!("range '{item}' is descending"));
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Format CPUs as a kernel cpulist, collapsing runs: `[0,1,2,3,8,10,11]` → `0-3,8,10-11`.
/// Input order and duplicates do not matter. The empty set formats as the empty string.
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// Intersection of two sorted, de-duplicated lists.
pub fn intersect(a: &[usize], b: &[usize]) -> Vec<usize> {
    a.iter()
        .copied()
        .filter(|c| b.binary_search(c).is_ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulist_parse() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11").unwrap(),
            [0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpulist("5\n").unwrap(), [5]);
        assert_eq!(parse_cpulist("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist("3,1-2,2").unwrap(), [1, 2, 3]);
        assert_eq!(parse_cpulist(" 0-1 , 4 ").unwrap(), [0, 1, 4]);
        assert_eq!(parse_cpulist("0-55,112-167").unwrap().len(), 112);
        for bad in [
            "3-1",
            "a",
            "1,",
            ",1",
            "1--2",
            "-1",
            "1-",
            "0-99999999",
            "0-3:2",
        ] {
            assert!(parse_cpulist(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cpulist_format() {
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpulist(&[]), "");
        assert_eq!(format_cpulist(&[7]), "7");
        assert_eq!(format_cpulist(&[2, 1, 1, 0]), "0-2");
        assert_eq!(format_cpulist(&[0, 2, 4]), "0,2,4");
        for s in ["0-3,8,10-11", "0-55,112-167", "1", "0,2-3,5-9,100"] {
            assert_eq!(format_cpulist(&parse_cpulist(s).unwrap()), s);
        }
    }

    #[test]
    fn intersection() {
        assert_eq!(intersect(&[0, 1, 2, 3], &[2, 3, 4]), [2, 3]);
        assert!(intersect(&[0, 1], &[2, 3]).is_empty());
    }
}
