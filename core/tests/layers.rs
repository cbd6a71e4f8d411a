//! Core's top-level modules import one way (`docs/architecture.md`, "Map of the code"): this test
//! reads every non-test source file under `core/src`, collects the `crate::<module>` paths it names,
//! and fails on a loop between two or more top-level modules (folders such as `registry/`, or single
//! files such as `aligned.rs`), printing the loop and a `use` line of each step.
//!
//! Test code is left out: files declared `#[cfg(test)] mod name;` (or with `any(test, ...)`, such as
//! the `testing` feature), and items under such an attribute (`mod tests { ... }`, a test-only
//! function). Comments and string literals are ignored. Only the standard library is used, so the
//! test reads the sources as text: a path spelled `crate::x` anywhere in code counts, a relative
//! `super::super::x` does not (core spells cross-folder paths with `crate::`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A source file's text with comments and string/char literals blanked out (lengths kept).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        out.extend_from_slice(b"  ");
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        out.extend_from_slice(b"  ");
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                        i += 1;
                    }
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"') | Some(b'#'))
                && !is_ident(b.get(i.wrapping_sub(1))) =>
            {
                // Raw string r"..." / r#"..."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push(b[i]);
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let end = find(b, j + 1, &close).map_or(b.len(), |e| e + close.len());
                out.extend(
                    b[i..end]
                        .iter()
                        .map(|&c| if c == b'\n' { b'\n' } else { b' ' }),
                );
                i = end;
            }
            b'"' => {
                out.push(b' ');
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    let step = if b[i] == b'\\' { 2 } else { 1 };
                    for _ in 0..step.min(b.len() - i) {
                        out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                        i += 1;
                    }
                }
                out.push(b' ');
                i += 1;
            }
            b'\'' if is_char_literal(b, i) => {
                let end = b[i + 1..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map_or(b.len(), |p| i + 1 + p + 1);
                out.extend(std::iter::repeat_n(b' ', end - i));
                i = end;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).expect("ASCII replacements keep UTF-8 valid")
}

fn is_ident(c: Option<&u8>) -> bool {
    c.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// `'x'`, `'\n'`, `'\u{..}'` (not a lifetime `'a`).
fn is_char_literal(b: &[u8], i: usize) -> bool {
    match b.get(i + 1) {
        Some(b'\\') => true,
        Some(_) => b.get(i + 2) == Some(&b'\'') || (b[i + 1] >= 0x80),
        None => false,
    }
}

fn find(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// The end (exclusive) of the item starting at `start`: through its matching `}` if a `{` comes
/// before any `;`, else through the `;` (or the `,` of a field or match arm; a `}` that closes the
/// enclosing block ends it too).
fn item_end(code: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    for (k, &c) in code.iter().enumerate().skip(start) {
        match c {
            b';' | b',' if depth == 0 => return k + 1,
            b'{' => depth += 1,
            b'}' if depth == 0 => return k,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// True for a `#[cfg(...)]` whose predicate makes the item test-only (`test`, or `any(test, ...)`).
fn is_test_cfg(attr: &str) -> bool {
    let inner: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
    inner == "#[cfg(test)]" || inner.starts_with("#[cfg(any(test,")
}

/// Code without its test-only items, and the names of the modules it declares test-only (`mod x;`).
fn strip_test_items(code: &str) -> (String, Vec<String>) {
    let mut bytes = code.as_bytes().to_vec();
    let mut test_mods = Vec::new();
    let mut from = 0;
    while let Some(at) = find(&bytes, from, b"#[cfg(") {
        let close = item_end_attr(&bytes, at);
        let attr = String::from_utf8_lossy(&bytes[at..close]).into_owned();
        if !is_test_cfg(&attr) {
            from = close;
            continue;
        }
        // Skip further attributes, then the item.
        let mut start = close;
        loop {
            while start < bytes.len() && bytes[start].is_ascii_whitespace() {
                start += 1;
            }
            if bytes[start..].starts_with(b"#[") {
                start = item_end_attr(&bytes, start);
            } else {
                break;
            }
        }
        let end = item_end(&bytes, start);
        let item = String::from_utf8_lossy(&bytes[start..end]).into_owned();
        let words: Vec<&str> = item
            .split(|c: char| c.is_whitespace() || c == ';' || c == '{')
            .filter(|w| !w.is_empty())
            .collect();
        if let Some(pos) = words.iter().position(|w| *w == "mod") {
            if item.trim_end().ends_with(';') {
                test_mods.push(words[pos + 1].to_owned());
            }
        }
        for c in &mut bytes[at..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    (String::from_utf8(bytes).expect("blanked ASCII"), test_mods)
}

/// The end of the attribute `#[...]` starting at `at` (brackets balanced).
fn item_end_attr(b: &[u8], at: usize) -> usize {
    let mut depth = 0usize;
    for (k, &c) in b.iter().enumerate().skip(at + 1) {
        match c {
            b'[' | b'(' => depth += 1,
            b']' | b')' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    b.len()
}

/// The top-level modules a piece of code names through `crate::x` or `crate::{x, y::z}`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let b = code.as_bytes();
    let mut names = BTreeSet::new();
    let mut from = 0;
    while let Some(at) = find(b, from, b"crate::") {
        from = at + 7;
        if is_ident(b.get(at.wrapping_sub(1))) {
            continue; // `rmm_core::`-like, or part of a longer identifier
        }
        let rest = &code[at + 7..];
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut word = String::new();
            let mut first = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        first = true;
                        word.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 && first {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        word.push(c);
                    } else if !word.is_empty() {
                        names.insert(std::mem::take(&mut word));
                        first = false;
                    }
                }
            }
            if first && !word.is_empty() {
                names.insert(word);
            }
        } else {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !word.is_empty() {
                names.insert(word);
            }
        }
    }
    names
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source folder") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file a `mod name;` declared in `file` lives in (`name.rs` or `name/mod.rs` beside it).
fn module_files(file: &Path, name: &str) -> Vec<PathBuf> {
    let dir = match file.file_name().and_then(|f| f.to_str()) {
        Some("mod.rs" | "lib.rs") => file.parent().unwrap().to_path_buf(),
        _ => file.with_extension(""),
    };
    vec![
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
}

/// Top-level module -> (module it names -> a line that names it), test code left out.
fn graph(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut stripped = BTreeMap::new();
    let mut test_files = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("UTF-8 source");
        let (code, test_mods) = strip_test_items(&code_only(&text));
        for name in test_mods {
            test_files.extend(module_files(file, &name));
        }
        stripped.insert(file.clone(), (code, text));
    }
    // A file under a test-only module is test code too.
    let is_test = |file: &Path| {
        test_files
            .iter()
            .any(|t| file == t || (t.ends_with("mod.rs") && file.starts_with(t.parent().unwrap())))
    };
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (file, (code, text)) in &stripped {
        if is_test(file) {
            continue;
        }
        let rel = file.strip_prefix(src).unwrap();
        let mut parts = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        let first = parts.next().unwrap();
        if first == "lib.rs" {
            continue;
        }
        let from = first.trim_end_matches(".rs").to_owned();
        for to in crate_paths(code) {
            let is_module = src.join(&to).is_dir() || src.join(format!("{to}.rs")).is_file();
            if to == from || !is_module {
                continue; // a re-export at the crate root (`crate::AnyResource`) names no folder
            }
            let line = text
                .lines()
                .zip(code.lines())
                .find(|(_, c)| c.contains(&format!("crate::{to}")) || c.contains("crate::{"))
                .map(|(t, _)| format!("{}: {}", rel.display(), t.trim()))
                .unwrap_or_else(|| rel.display().to_string());
            edges
                .entry(from.clone())
                .or_default()
                .entry(to)
                .or_insert(line);
        }
    }
    edges
}

/// A loop in `edges`, as the list of modules it visits (first repeated at the end).
fn find_loop(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeMap<String, String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flat_map(|m| m.keys()) {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

#[test]
fn core_folders_import_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = graph(&src);
    assert!(
        edges.contains_key("buffer") && edges.contains_key("view"),
        "the scan found core's folders: {edges:?}"
    );
    if let Some(cycle) = find_loop(&edges) {
        let steps: Vec<String> = cycle
            .windows(2)
            .map(|w| format!("  {} -> {}   ({})", w[0], w[1], edges[&w[0]][&w[1]]))
            .collect();
        panic!(
            "a loop between core's top-level modules:\n{}",
            steps.join("\n")
        );
    }
}

#[test]
fn the_scan_sees_loops_and_skips_test_code() {
    let code = code_only(
        "use crate::{cuda::Stream, error::{Error, Result}};\n// crate::view in a comment\nlet s = \"crate::buffer\";\n\
         #[cfg(test)]\nmod tests { use crate::registry; }\n#[cfg(any(test, feature = \"testing\"))]\npub mod testing;\nfn f() { crate::mr::x(); }\n",
    );
    let (code, test_mods) = strip_test_items(&code);
    assert_eq!(test_mods, ["testing"]);
    let names: Vec<String> = crate_paths(&code).into_iter().collect();
    assert_eq!(names, ["cuda", "error", "mr"]);
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (a, b) in [
        ("view", "buffer"),
        ("buffer", "registry"),
        ("registry", "view"),
        ("registry", "mr"),
    ] {
        edges
            .entry(a.into())
            .or_default()
            .insert(b.into(), String::new());
    }
    let cycle = find_loop(&edges).expect("the loop is found");
    assert_eq!(cycle.first(), cycle.last());
    assert_eq!(cycle.len(), 4);
    edges.get_mut("registry").unwrap().remove("view");
    assert_eq!(find_loop(&edges), None);
}

/// Lines of code a reader must hold per file (`docs/architecture.md`): non-blank lines once
/// comments and test items are gone.
const MOST_LINES_OF_CODE: usize = 900;

#[test]
fn no_core_source_file_is_above_900_lines_of_code() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let stripped: Vec<(PathBuf, String, Vec<String>)> = files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).expect("core's sources are readable");
            let (code, test_mods) = strip_test_items(&code_only(&text));
            (file, code, test_mods)
        })
        .collect();
    let test_mods: BTreeSet<&str> = stripped
        .iter()
        .flat_map(|(_, _, mods)| mods.iter().map(String::as_str))
        .collect();
    let module_name = |file: &Path| {
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if stem == "mod" {
            let parent = file.parent().and_then(|p| p.file_name());
            parent.and_then(|p| p.to_str()).unwrap_or("").to_owned()
        } else {
            stem.to_owned()
        }
    };
    let mut too_long: Vec<String> = stripped
        .iter()
        .filter(|(file, _, _)| !test_mods.contains(module_name(file).as_str()))
        .filter_map(|(file, code, _)| {
            let lines = code.lines().filter(|l| !l.trim().is_empty()).count();
            (lines > MOST_LINES_OF_CODE).then(|| {
                format!(
                    "  {} ({lines} lines)",
                    file.strip_prefix(&src).unwrap().display()
                )
            })
        })
        .collect();
    too_long.sort();
    assert!(
        too_long.is_empty(),
        "core source files above {MOST_LINES_OF_CODE} lines of code (split them by concern):\n{}",
        too_long.join("\n")
    );
}
