//! Reprojects points read from stdin (`x y` per line) and prints them, 17 significant digits,
//! for the comparison with PROJ in `verify/`:
//!
//! ```text
//! cargo run -p geom --example reproject -- EPSG:4326 EPSG:32648 < points.txt
//! ```

use std::io::{BufRead, Write};

use geom::{Crs, Reprojector};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [from, to] = args.as_slice() else {
        return Err("usage: reproject FROM TO < points".into());
    };
    let r = Reprojector::new(&Crs::parse(from)?, &Crs::parse(to)?)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let mut it = line.split_whitespace().map(str::parse::<f64>);
        let (Some(Ok(x)), Some(Ok(y))) = (it.next(), it.next()) else {
            continue;
        };
        let (u, v) = r.transform(x, y)?;
        writeln!(out, "{u:.17e} {v:.17e}")?;
    }
    Ok(())
}
