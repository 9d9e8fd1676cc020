//! Size lists as `bench --sizes` and `passes --n` take them: numbers, powers of two, and doubling
//! ranges.

/// Sizes in the order given, duplicates removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeList(pub Vec<u64>);

/// One size: a number (`100000`) or a power of two (`2^20`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty size: write a number or a power such as 2^20".to_owned());
    }
    match s.split_once('^') {
        Some(("2", exp)) => {
            let exp: u32 = exp.parse().map_err(|_| format!("`{s}`: the exponent must be a whole number"))?;
            if exp >= 63 {
                return Err(format!("`{s}` is too large"));
            }
            Ok(1u64 << exp)
        }
        Some(_) => Err(format!("`{s}`: only powers of two are written with ^ (such as 2^20)")),
        None => s.parse().map_err(|_| format!("`{s}` is not a size: write a number or a power such as 2^20")),
    }
}

/// A comma-separated list of sizes and ranges. `A..B` doubles from A while at most B:
/// `2^10..2^24` is every power of two from 2^10 to 2^24, `1000..8000` is 1000, 2000, 4000, 8000.
pub fn parse_sizes(s: &str) -> Result<SizeList, String> {
    let mut sizes = Vec::new();
    for item in s.split(',') {
        match item.split_once("..") {
            Some((from, to)) => {
                let (from, to) = (parse_size(from)?, parse_size(to)?);
                if from == 0 {
                    return Err(format!("`{}`: a range must start at 1 or more", item.trim()));
                }
                if from > to {
                    return Err(format!("`{}`: the range's start is past its end", item.trim()));
                }
                let mut n = from;
                while n <= to {
                    sizes.push(n);
                    n = match n.checked_mul(2) {
                        Some(next) => next,
                        None => break,
                    };
                }
            }
            None => sizes.push(parse_size(item)?),
        }
    }
    let mut seen = std::collections::HashSet::new();
    sizes.retain(|n| seen.insert(*n));
    Ok(SizeList(sizes))
}

/// One GPU-side count of `bench --count`: a number of elements or a share of each size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CountSpec {
    /// This many elements (a count above the size is clamped to it, as on the GPU).
    Elements(u64),
    /// This percentage of each size, rounded down.
    Percent(f64),
}

impl CountSpec {
    /// The count for a sort of n elements.
    pub fn of(&self, n: u64) -> u64 {
        match *self {
            CountSpec::Elements(count) => count,
            CountSpec::Percent(p) => (n as f64 * p / 100.0) as u64,
        }
    }
}

/// Counts in the order given.
#[derive(Clone, Debug, PartialEq)]
pub struct CountList(pub Vec<CountSpec>);

/// A comma-separated list of counts: numbers, powers of two, or percentages such as `25%`.
pub fn parse_counts(s: &str) -> Result<CountList, String> {
    let counts = s
        .split(',')
        .map(|item| {
            let item = item.trim();
            match item.strip_suffix('%') {
                Some(p) => match p.trim().parse::<f64>() {
                    Ok(p) if (0.0..=100.0).contains(&p) => Ok(CountSpec::Percent(p)),
                    _ => Err(format!("`{item}`: a percentage is a number from 0 to 100 followed by %")),
                },
                None => {
                    let count = parse_size(item)?;
                    if count > u64::from(u32::MAX) {
                        return Err(format!("`{item}`: a GPU-side count is a u32"));
                    }
                    Ok(CountSpec::Elements(count))
                }
            }
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(CountList(counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_powers_and_ranges() {
        assert_eq!(parse_sizes("1000,5000,100000"), Ok(SizeList(vec![1000, 5000, 100000])));
        assert_eq!(parse_sizes("2^10..2^13"), Ok(SizeList(vec![1024, 2048, 4096, 8192])));
        assert_eq!(parse_sizes("1000..8000"), Ok(SizeList(vec![1000, 2000, 4000, 8000])));
        assert_eq!(parse_sizes("1000..7999"), Ok(SizeList(vec![1000, 2000, 4000])));
        assert_eq!(parse_sizes("2^4, 16, 2^3..2^5"), Ok(SizeList(vec![16, 8, 32])));
    }

    #[test]
    fn rejects_bad_syntax() {
        for bad in ["", "2^", "3^4", "2^x", "abc", "-5", "10..", "..10", "20..10", "0..4", "2^63", "1,,2"] {
            assert!(parse_sizes(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn counts_are_numbers_powers_or_percentages() {
        assert_eq!(
            parse_counts("4096, 2^15,25%").expect("valid").0,
            vec![CountSpec::Elements(4096), CountSpec::Elements(1 << 15), CountSpec::Percent(25.0)]
        );
        assert_eq!(CountSpec::Percent(25.0).of(1 << 20), 1 << 18);
        for bad in ["", "101%", "-1%", "x%", "2^33", "abc"] {
            assert!(parse_counts(bad).is_err(), "{bad}");
        }
    }
}
