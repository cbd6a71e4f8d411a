//! The hand-written `include/rmm_rs/rmm_c.h` matches the entry points defined here: every `rmm_*`
//! function the header declares is defined with `#[no_mangle]` in `src/`, and the other way round,
//! with the same number of parameters and the same C types (`*mut T` is `T*`, `*const T` is
//! `const T*`, `c_int` is `int`, `usize` is `size_t`, ...). Its numbers agree with Rust's too: the
//! `RMM_RESOURCE_KIND_*` defines are rmm-core's kind table (`mr/kind.rs`), `enum rmm_status` is its
//! status list (`resource/status.rs`), and every other integer `#define RMM_*` has a Rust `const` of
//! the same name and value (or is an access bit).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rmm_core::mr::kind::ResourceKind;
use rmm_core::resource::status::STATUS_CODES;
use rmm_core::Access;

/// A signature as C spells it: the return type and the parameter types, normalised.
type Signature = (String, Vec<String>);

/// Collapses whitespace and puts `*` right after the type it follows.
fn normalise(c: &str) -> String {
    let spaced = c.replace('*', " * ");
    let words: Vec<&str> = spaced.split_whitespace().collect();
    words.join(" ").replace(" *", "*")
}

/// The C type of a Rust FFI type.
fn c_type(rust: &str) -> String {
    let rust = rust.trim();
    if let Some(inner) = rust.strip_prefix("*mut ") {
        return normalise(&format!("{}*", c_type(inner)));
    }
    if let Some(inner) = rust.strip_prefix("*const ") {
        let inner = c_type(inner);
        // `*const *mut T` is `T* const*`; rmm_c.h has none, so only the outer const is handled.
        return normalise(&format!("const {inner}*"));
    }
    let c = match rust.rsplit("::").next().unwrap_or(rust) {
        "()" | "" => "void",
        "c_void" => "void",
        "c_int" => "int",
        "i32" => "int32_t",
        "c_char" => "char",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "i64" => "int64_t",
        "usize" => "size_t",
        "f64" => "double",
        "bool" => "bool",
        other => other,
    };
    c.to_owned()
}

/// Splits a parameter list on top-level commas.
fn split_params(list: &str) -> Vec<String> {
    let (mut out, mut depth, mut cur) = (Vec::new(), 0i32, String::new());
    for ch in list.chars() {
        match ch {
            '(' | '<' | '[' => depth += 1,
            ')' | '>' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out.into_iter()
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

/// `text` without its `/* */` and `//` comments.
fn strip_comments(text: &str) -> String {
    let mut code = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("/*") {
            rest = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else if let Some(r) = rest.strip_prefix("//") {
            rest = r.find('\n').map_or("", |i| &r[i..]);
        } else {
            let ch = rest.chars().next().expect("non-empty");
            code.push(ch);
            rest = &rest[ch.len_utf8()..];
        }
    }
    code
}

/// The value of an integer constant as C or Rust spells it (`1u`, `UINT64_MAX`, `u64::MAX`,
/// `8`); `None` for anything else (a string, an expression).
fn integer(value: &str) -> Option<i128> {
    let value = value.trim();
    match value {
        "UINT64_MAX" | "u64::MAX" => return Some(u64::MAX.into()),
        _ => {}
    }
    value
        .trim_end_matches(['u', 'U'])
        .replace('_', "")
        .parse()
        .ok()
}

/// The integer `#define RMM_*` values of the header, and the entries of its `enum`s, by name.
fn header_constants(text: &str) -> BTreeMap<String, i128> {
    let code = strip_comments(text);
    let mut out = BTreeMap::new();
    for line in code.lines() {
        let mut words = line.split_whitespace();
        if let (Some("#define"), Some(name), Some(value)) =
            (words.next(), words.next(), words.next())
        {
            if let (true, Some(v)) = (name.starts_with("RMM_"), integer(value)) {
                out.insert(name.to_owned(), v);
            }
        }
    }
    for (i, _) in code.match_indices("enum ") {
        let body = &code[i..];
        let (Some(open), Some(close)) = (body.find('{'), body.find('}')) else {
            continue;
        };
        for entry in body[open + 1..close].split(',') {
            if let Some((name, value)) = entry.split_once('=') {
                let value = integer(value)
                    .unwrap_or_else(|| panic!("enum entry {entry:?} has no integer value"));
                out.insert(name.trim().to_owned(), value);
            }
        }
    }
    out
}

/// The `rmm_*` prototypes of the header (comments and preprocessor lines removed).
fn header_signatures(text: &str) -> BTreeMap<String, Signature> {
    let code: String = strip_comments(text)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeMap::new();
    for statement in code.split([';', '{', '}']) {
        let s = statement.trim();
        // Function declarations: `<ret> rmm_name(<params>)`; typedefs of function pointers are
        // `typedef <ret> (*name)(...)` and are skipped.
        if s.starts_with("typedef") {
            continue;
        }
        let Some(open) = s.find('(') else { continue };
        let head = &s[..open];
        let Some(name_start) = head
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map(|i| i + 1)
            .or(Some(0))
        else {
            continue;
        };
        let name = head[name_start..].trim();
        if !name.starts_with("rmm_") || !s.ends_with(')') {
            continue;
        }
        let ret = head[..name_start]
            .trim()
            .trim_start_matches("RMM_EXPORT")
            .trim();
        let params = &s[open + 1..s.len() - 1];
        let mut types: Vec<String> = split_params(params)
            .iter()
            .map(|p| {
                // Drop the parameter name: the last identifier, unless the type is all there is.
                let p = normalise(p);
                match p.rfind(|c: char| !(c.is_alphanumeric() || c == '_')) {
                    Some(i) if !p[i + 1..].is_empty() => normalise(&p[..=i]),
                    _ if p == "void" => p,
                    _ => match p.rsplit_once(' ') {
                        Some((ty, _name)) => normalise(ty),
                        None => p,
                    },
                }
            })
            .collect();
        if types == ["void"] {
            types.clear();
        }
        out.insert(name.to_owned(), (normalise(ret), types));
    }
    out
}

/// The `#[no_mangle]` `rmm_*` functions defined in the Rust sources under `dir`.
fn rust_signatures(dir: &Path) -> BTreeMap<String, Signature> {
    let mut out = BTreeMap::new();
    for (_, text) in rust_sources(&[dir.to_path_buf()]) {
        for (i, _) in text.match_indices("#[no_mangle]") {
            let after = &text[i..];
            // The function follows the attribute (perhaps after other attributes and docs).
            let Some(fn_at) = after
                .find("fn rmm_")
                .filter(|&at| !after[..at].contains('{'))
            else {
                continue;
            };
            let sig = &after[fn_at + 3..];
            let open = sig.find('(').expect("a parameter list");
            let name = sig[..open].trim().to_owned();
            let mut depth = 0;
            let close = sig[open..]
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map(|(j, _)| open + j)
                .expect("a closed parameter list");
            let params = split_params(&sig[open + 1..close])
                .iter()
                .map(|p| c_type(p.split_once(':').map_or(p.as_str(), |(_, ty)| ty)))
                .collect();
            let tail = &sig[close + 1..];
            let body = tail.find('{').expect("a body");
            let ret = tail[..body]
                .trim()
                .strip_prefix("->")
                .map_or("void".to_owned(), c_type);
            out.insert(name, (ret, params));
        }
    }
    out
}

/// The Rust files under `dirs`, recursively, except this one.
fn rust_sources(dirs: &[PathBuf]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut files = dirs.to_vec();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).expect("readable source folder") {
                files.push(entry.expect("readable entry").path());
            }
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("header_check.rs")
        {
            let text = std::fs::read_to_string(&path).expect("readable source");
            out.push((path, text));
        }
    }
    out
}

/// The integer `const RMM_*: T = value;` items of the Rust sources under `dirs`, by name.
fn rust_constants(dirs: &[PathBuf]) -> BTreeMap<String, i128> {
    let mut out = BTreeMap::new();
    for (path, text) in rust_sources(dirs) {
        for (i, _) in text.match_indices("const RMM_") {
            let item = &text[i + "const ".len()..];
            let Some(end) = item.find(';') else { continue };
            let Some((name, rest)) = item[..end].split_once(':') else {
                continue;
            };
            let Some((_ty, value)) = rest.split_once('=') else {
                continue;
            };
            if let Some(v) = integer(value) {
                if let Some(before) = out.insert(name.trim().to_owned(), v) {
                    assert_eq!(
                        before,
                        v,
                        "{name} has two values (one in {})",
                        path.display()
                    );
                }
            }
        }
    }
    out
}

/// This crate's folder: the sources where this test was built, else (a staged test executable on
/// another machine, run from the repository root) the checkout it runs in; `None` (and a skip
/// notice for `test`) when neither is there.
fn crate_root(test: &str) -> Option<PathBuf> {
    let candidates = [
        PathBuf::from(env!("CARGO_MANIFEST_DIR")),
        PathBuf::from("bindings-cpp"),
    ];
    let root = candidates
        .iter()
        .find(|r| r.join("include/rmm_rs/rmm_c.h").is_file() && r.join("src").is_dir());
    if root.is_none() {
        rmm_core::testing::skip(test, "the bindings-cpp sources are not on this machine");
    }
    root.cloned()
}

#[test]
fn rmm_c_h_kinds_and_statuses_are_rust_lists() {
    let Some(root) = crate_root("header_check::rmm_c_h_kinds_and_statuses_are_rust_lists") else {
        return;
    };
    let header = header_constants(
        &std::fs::read_to_string(root.join("include/rmm_rs/rmm_c.h")).expect("rmm_c.h"),
    );
    let in_header = |prefix: &str| -> BTreeMap<String, i128> {
        header
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(n, v)| (n.clone(), *v))
            .collect()
    };
    let kinds: BTreeMap<String, i128> = ResourceKind::ALL
        .iter()
        .map(|k| (k.c_name().to_owned(), k.code().into()))
        .collect();
    let wrong = differences(&in_header("RMM_RESOURCE_KIND_"), &kinds);
    assert!(
        wrong.is_empty(),
        "RMM_RESOURCE_KIND_* in rmm_c.h and mr/kind.rs differ:\n{}",
        wrong.join("\n")
    );
    let statuses: BTreeMap<String, i128> = STATUS_CODES
        .iter()
        .map(|(name, code)| (name.to_str().unwrap().to_owned(), (*code).into()))
        .collect();
    let mut header_statuses = in_header("RMM_ERROR_");
    header_statuses.remove("RMM_ERROR_MESSAGE_SIZE");
    header_statuses.extend(in_header("RMM_OK"));
    let wrong = differences(&header_statuses, &statuses);
    assert!(
        wrong.is_empty(),
        "enum rmm_status in rmm_c.h and resource/status.rs differ:\n{}",
        wrong.join("\n")
    );
}

/// The names whose values differ between `header` and `rust`, or that only one of them has.
fn differences(header: &BTreeMap<String, i128>, rust: &BTreeMap<String, i128>) -> Vec<String> {
    let names: std::collections::BTreeSet<&String> = header.keys().chain(rust.keys()).collect();
    names
        .into_iter()
        .filter(|name| header.get(*name) != rust.get(*name))
        .map(|name| {
            format!(
                "{name}: rmm_c.h {:?}, Rust {:?}",
                header.get(name),
                rust.get(name)
            )
        })
        .collect()
}

#[test]
fn every_other_rmm_c_h_number_is_a_rust_constant() {
    let Some(root) = crate_root("header_check::every_other_rmm_c_h_number_is_a_rust_constant")
    else {
        return;
    };
    let header = header_constants(
        &std::fs::read_to_string(root.join("include/rmm_rs/rmm_c.h")).expect("rmm_c.h"),
    );
    let rust = rust_constants(&[root.join("src"), root.join("../core/src")]);
    let access = BTreeMap::from([
        ("RMM_ACCESS_DEVICE", i128::from(Access::DEVICE.bits())),
        ("RMM_ACCESS_HOST", i128::from(Access::HOST.bits())),
    ]);
    let listed = |name: &str| {
        ResourceKind::ALL.iter().any(|k| k.c_name() == name)
            || STATUS_CODES
                .iter()
                .any(|(n, _)| n.to_bytes() == name.as_bytes())
    };
    let mut wrong = Vec::new();
    for (name, value) in header.iter().filter(|(name, _)| !listed(name)) {
        let expected = rust
            .get(name)
            .copied()
            .or_else(|| access.get(name.as_str()).copied());
        if expected != Some(*value) {
            wrong.push(format!("{name}: rmm_c.h {value}, Rust {expected:?}"));
        }
    }
    assert!(
        header.len() > 30,
        "found only {} numbers in rmm_c.h",
        header.len()
    );
    assert!(
        wrong.is_empty(),
        "rmm_c.h numbers without a Rust constant of that value:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn rmm_c_h_declares_exactly_the_exported_functions_with_their_signatures() {
    let Some(root) = crate_root(
        "header_check::rmm_c_h_declares_exactly_the_exported_functions_with_their_signatures",
    ) else {
        return;
    };
    let header =
        std::fs::read_to_string(root.join("include/rmm_rs/rmm_c.h")).expect("rmm_c.h is readable");
    let declared = header_signatures(&header);
    let defined = rust_signatures(&root.join("src"));
    assert!(
        defined.len() > 80,
        "found only {} exported functions in src/",
        defined.len()
    );
    let only_header: Vec<_> = declared
        .keys()
        .filter(|k| !defined.contains_key(*k))
        .collect();
    let only_rust: Vec<_> = defined
        .keys()
        .filter(|k| !declared.contains_key(*k))
        .collect();
    assert!(
        only_header.is_empty(),
        "declared in rmm_c.h but not defined (#[no_mangle]) in src/: {only_header:?}"
    );
    assert!(
        only_rust.is_empty(),
        "exported from src/ but not declared in rmm_c.h: {only_rust:?}"
    );
    let mismatched: Vec<String> = defined
        .iter()
        .filter(|(name, sig)| declared[*name] != **sig)
        .map(|(name, sig)| format!("{name}: rmm_c.h {:?} vs Rust {:?}", declared[name], sig))
        .collect();
    assert!(
        mismatched.is_empty(),
        "signatures differ:\n{}",
        mismatched.join("\n")
    );
}

#[test]
fn the_parsers_read_what_they_should() {
    let h = header_signatures(
        "/* c */ #define X 1\ntypedef int (*cb)(void* a);\nRMM_EXPORT int rmm_f(const char* name, rmm_resource r, \
         void** out); // x\nvoid rmm_g(void);\nsize_t rmm_h(const rmm_device_buffer* buf);",
    );
    assert_eq!(
        h["rmm_f"],
        (
            "int".into(),
            vec!["const char*".into(), "rmm_resource".into(), "void**".into()]
        )
    );
    assert_eq!(h["rmm_g"], ("void".into(), vec![]));
    assert_eq!(
        h["rmm_h"],
        ("size_t".into(), vec!["const rmm_device_buffer*".into()])
    );
    assert_eq!(c_type("*mut *mut c_void"), "void**");
    assert_eq!(
        c_type("*const rmm_device_buffer"),
        "const rmm_device_buffer*"
    );
    assert_eq!(c_type("abi::rmm_log_write"), "rmm_log_write");
    let c = header_constants(
        "#define RMM_A 1u /* a */\n#define RMM_B UINT64_MAX\n#define RMM_S \"x\"\nenum e {\n  RMM_C = 0, /**< c */\n  RMM_D = 7 };",
    );
    let expected = [
        ("RMM_A", 1),
        ("RMM_B", u64::MAX.into()),
        ("RMM_C", 0),
        ("RMM_D", 7),
    ];
    assert_eq!(
        c,
        expected.iter().map(|&(n, v)| (n.to_owned(), v)).collect()
    );
}
