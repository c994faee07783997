//! The layering `lib.rs` states is the one the code keeps: every `crate::`
//! path in a module names a module listed before it in the layer list of
//! `lib.rs`'s documentation (a root re-export counts as the module it comes
//! from). An upward import, or a module missing from the list, fails here
//! with the file and line. Inside `db/`, the tiers `db/mod.rs` lists (helpers,
//! subsystems, the engine, the facade) are kept likewise for `super::`
//! paths.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The layer list: module names in order, from the numbered items under
/// `# Layers` in `lib.rs` (each item's backticked names before its colon).
fn layers(lib: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_section = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else { break };
        let doc = doc.trim();
        if doc.starts_with("# ") {
            in_section = doc == "# Layers";
            continue;
        }
        if !in_section {
            continue;
        }
        let Some((number, rest)) = doc.split_once(". ") else { continue };
        if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let head = rest.split(':').next().unwrap_or("");
        for (i, part) in head.split('`').enumerate() {
            if i % 2 == 1 {
                names.push(part.to_string());
            }
        }
    }
    names
}

/// Root re-exports (`pub use module::{A, B};`, `pub use module::A;`): the
/// module each name comes from.
fn root_reexports(lib: &str) -> HashMap<String, String> {
    let mut map = HashMap::new();
    let code = strip_comments(lib);
    for (i, _) in code.match_indices("pub use ") {
        let stmt = &code[i..];
        let stmt = &stmt[..stmt.find(';').unwrap_or(stmt.len())];
        let path = stmt["pub use ".len()..].trim().trim_start_matches("crate::");
        let Some((module, rest)) = path.split_once("::") else { continue };
        let rest = rest.trim().trim_start_matches('{').trim_end_matches('}');
        for item in rest.split(',') {
            let name = item.split("::").last().unwrap_or("").trim();
            let name = name.rsplit(" as ").next().unwrap_or(name).trim();
            if !name.is_empty() {
                map.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    map
}

/// The text without `//` comments (doc comments included); string literals
/// holding `//` are not a concern in this crate's sources.
fn strip_comments(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first path segment of every `crate::` path in `text`, grouped
/// imports (`crate::{a::B, C}`, over several lines as rustfmt wraps them)
/// included, with the byte offset where each segment starts.
fn crate_paths_at(text: &str) -> Vec<(usize, String)> {
    paths_at(text, "crate::")
}

/// [`crate_paths_at`] for paths starting with `prefix` (`crate::`, `super::`).
fn paths_at(text: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find(prefix) {
        let found = at + i;
        let preceded_by_ident =
            text[..found].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
        at = found + prefix.len();
        if preceded_by_ident {
            continue;
        }
        let rest = &text[at..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: the first segment after `{` and
            // after each comma at depth 0.
            let base = at + 1;
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        start = false;
                        let id = ident_at(&group[j..]);
                        if !id.is_empty() {
                            out.push((base + j, id.to_string()));
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let id = ident_at(rest);
            if !id.is_empty() {
                out.push((at, id.to_string()));
            }
        }
    }
    out
}

/// The first segments of [`crate_paths_at`], without their offsets.
fn crate_paths(text: &str) -> Vec<String> {
    crate_paths_at(text).into_iter().map(|(_, name)| name).collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every upward or unlisted import under `src`, as `file:line: message`.
fn violations(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let order = layers(&lib);
    assert!(order.len() >= 10, "lib.rs lists too few layers: {order:?}");
    let rank: HashMap<&str, usize> = order.iter().enumerate().map(|(i, m)| (m.as_str(), i)).collect();
    let reexports = root_reexports(&lib);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        if rel == Path::new("lib.rs") {
            continue;
        }
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().to_string();
        let module = first.strip_suffix(".rs").unwrap_or(&first).to_string();
        let Some(&own) = rank.get(module.as_str()) else {
            found.push(format!("{}: module `{module}` is not in lib.rs's layer list", rel.display()));
            continue;
        };
        let text = strip_comments(&std::fs::read_to_string(&file).unwrap());
        let line_of = |offset: usize| text[..offset].matches('\n').count();
        for (offset, name) in crate_paths_at(&text) {
            let n = line_of(offset);
            let target = if rank.contains_key(name.as_str()) {
                name.clone()
            } else if let Some(m) = reexports.get(&name) {
                m.clone()
            } else {
                found.push(format!(
                    "{}:{}: `crate::{name}` is neither a module nor a root re-export",
                    rel.display(),
                    n + 1
                ));
                continue;
            };
            if target == module {
                continue;
            }
            match rank.get(target.as_str()) {
                Some(&r) if r < own => {}
                Some(_) => found.push(format!(
                    "{}:{}: `{module}` imports `{target}` (via `crate::{name}`), which is not below it",
                    rel.display(),
                    n + 1
                )),
                None => found.push(format!("{}:{}: `{target}` is not in lib.rs's layer list", rel.display(), n + 1)),
            }
        }
    }
    found
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let found = violations(&src_dir());
    assert!(found.is_empty(), "imports against the layers of lib.rs:\n{}", found.join("\n"));
}

#[test]
fn the_check_finds_an_upward_import_and_an_unlisted_module() {
    // A copy of the real sources with one upward import added (the table
    // reader naming the database handle) and one module the list lacks.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("src");
    copy_tree(&src_dir(), &copy);
    let reader = copy.join("sst/table_reader.rs");
    let mut text = std::fs::read_to_string(&reader).unwrap();
    text.push_str("\n#[allow(dead_code)]\nfn upward(_: &crate::Db) {}\n");
    text.push_str("#[allow(unused_imports)]\nuse crate::{\n    key,\n    compaction::CompactionJob,\n};\n");
    std::fs::write(&reader, text).unwrap();
    std::fs::write(copy.join("stray.rs"), "use crate::key::InternalKey;\n").unwrap();
    let found = violations(&copy);
    assert!(
        found.iter().any(|v| v.starts_with("sst/table_reader.rs:") && v.contains("`sst` imports `db`")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|v| v.starts_with("sst/table_reader.rs:") && v.contains("`sst` imports `compaction`")),
        "a group wrapped over lines is read: {found:?}"
    );
    assert!(found.iter().any(|v| v.contains("module `stray` is not in lib.rs's layer list")), "{found:?}");
    assert_eq!(found.len(), 3, "{found:?}");
}

#[test]
fn paths_are_read_from_plain_and_grouped_imports_and_comments_are_not() {
    assert_eq!(crate_paths("use crate::sst::{Block, Table};"), ["sst"]);
    assert_eq!(crate_paths("use crate::{Error, key::{A, B}, wal::LogWriter};"), ["Error", "key", "wal"]);
    assert_eq!(crate_paths("let x = crate::Options::default(); f(crate::db::Db)"), ["Options", "db"]);
    assert_eq!(crate_paths("$crate::kill_points::hit()"), Vec::<String>::new());
    // A group rustfmt wraps over lines: every item, at its own line.
    let wrapped = "use crate::{\n    error::Result,\n    sst::{Block, Table},\n};\nuse crate::key::A;\n";
    let at: Vec<(usize, String)> = crate_paths_at(wrapped)
        .into_iter()
        .map(|(offset, name)| (wrapped[..offset].matches('\n').count() + 1, name))
        .collect();
    assert_eq!(at, [(2, "error".to_string()), (3, "sst".to_string()), (5, "key".to_string())]);
    assert!(strip_comments("/// see [`crate::db::Db`]\nlet a = 1; // crate::db").find("crate::").is_none());
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

#[test]
fn root_reexports_are_read_after_any_item() {
    let lib = "internal_modules! {\n    key;\n    wal;\n}\n\npub use db::{\n    Db, Snapshot,\n};\npub use key::SequenceNumber;\n";
    let map = root_reexports(lib);
    assert_eq!(map.get("Db").map(String::as_str), Some("db"));
    assert_eq!(map.get("Snapshot").map(String::as_str), Some("db"));
    assert_eq!(map.get("SequenceNumber").map(String::as_str), Some("key"));
    assert_eq!(map.len(), 3, "{map:?}");
}

// ---- inside db/ ----

/// The tiers of `db/mod.rs`'s "# Inside `db/`" list: per tier, its files
/// in order (the backticked names after each numbered item's colon).
fn db_tiers(mod_rs: &str) -> Vec<Vec<String>> {
    let mut tiers: Vec<Vec<String>> = Vec::new();
    let mut in_section = false;
    for line in mod_rs.lines() {
        let Some(doc) = line.strip_prefix("//!") else { break };
        let doc = doc.trim();
        if doc.starts_with("# ") {
            in_section = doc == "# Inside `db/`";
            continue;
        }
        if !in_section {
            continue;
        }
        let (number, rest) = doc.split_once(". ").unwrap_or(("", doc));
        let starts_item = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit());
        let names_part = if starts_item {
            tiers.push(Vec::new());
            rest.split_once(':').map_or("", |(_, names)| names)
        } else {
            doc
        };
        let Some(tier) = tiers.last_mut() else { continue };
        for (i, part) in names_part.split('`').enumerate() {
            if i % 2 == 1 {
                tier.push(part.to_string());
            }
        }
    }
    tiers
}

/// What `db/mod.rs` re-exports from its files (`pub use file::{A, B};`,
/// `pub(crate) use file::A;`): the file each name comes from. Names it
/// re-exports from elsewhere in the crate (`crate::...`) are not db files.
fn db_reexports(mod_rs: &str) -> HashMap<String, String> {
    let mut map = HashMap::new();
    let code = strip_comments(mod_rs);
    for (i, _) in code.match_indices(" use ") {
        let stmt = &code[i + " use ".len()..];
        let stmt = stmt[..stmt.find(';').unwrap_or(stmt.len())].trim();
        if stmt.starts_with("crate::") || stmt.starts_with("std::") {
            continue;
        }
        let Some((file, rest)) = stmt.split_once("::") else { continue };
        let rest = rest.trim().trim_start_matches('{').trim_end_matches('}');
        for item in rest.split(',') {
            let name = item.split("::").last().unwrap_or("").trim();
            let name = name.rsplit(" as ").next().unwrap_or(name).trim();
            if !name.is_empty() {
                map.insert(name.to_string(), file.trim().to_string());
            }
        }
    }
    map
}

/// The first segment of every `super::` path in `text` (plain or a group),
/// with its byte offset.
fn super_paths_at(text: &str) -> Vec<(usize, String)> {
    paths_at(text, "super::")
}

/// Every `super::` path in `db/` against the tiers of `db/mod.rs`, as
/// `file:line: message`.
fn db_violations(src: &Path) -> Vec<String> {
    let db = src.join("db");
    let mod_rs = std::fs::read_to_string(db.join("mod.rs")).unwrap();
    let tiers = db_tiers(&mod_rs);
    assert_eq!(tiers.len(), 4, "db/mod.rs lists {} tiers: {tiers:?}", tiers.len());
    // Per file: its tier and its place in it.
    let place: HashMap<&str, (usize, usize)> = tiers
        .iter()
        .enumerate()
        .flat_map(|(t, files)| files.iter().enumerate().map(move |(i, f)| (f.as_str(), (t, i))))
        .collect();
    let reexports = db_reexports(&mod_rs);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let name = file.file_stem().unwrap().to_string_lossy().to_string();
        let Some(&(tier, index)) = place.get(name.as_str()) else {
            found.push(format!("db/{name}.rs: not in db/mod.rs's tiers"));
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit tests may reach anything.
        let text = strip_comments(text.split("#[cfg(test)]").next().unwrap_or(""));
        for (offset, head) in super_paths_at(&text) {
            let line = text[..offset].matches('\n').count() + 1;
            let target = if place.contains_key(head.as_str()) {
                head.clone()
            } else if let Some(f) = reexports.get(&head) {
                f.clone()
            } else if name == "mod" || head == "super" {
                continue;
            } else {
                // Defined in mod.rs itself (the handle's types), or a
                // re-export from elsewhere in the crate.
                if mod_rs_defines(&mod_rs, &head) {
                    "mod".to_string()
                } else {
                    continue;
                }
            };
            if target == name {
                continue;
            }
            let Some(&(t, i)) = place.get(target.as_str()) else { continue };
            // Tiers are counted from 0 here: 0 helpers, 1 subsystems, 2 the
            // engine, 3 the facade.
            let allowed = t < tier
                || tier == 3
                || (t == tier && tier < 2 && i < index)
                || (t == tier && tier == 2)
                || (tier == 2 && target == "mod" && (head == "Db" || head == "Snapshot"));
            if !allowed {
                found.push(format!(
                    "db/{name}.rs:{line}: `{name}` (tier {}) names `{target}` (tier {}) via `super::{head}`",
                    tier + 1,
                    t + 1
                ));
            }
        }
    }
    found
}

/// Whether `db/mod.rs` defines the item `name` itself.
fn mod_rs_defines(mod_rs: &str, name: &str) -> bool {
    ["struct", "enum", "fn", "type", "const", "trait"].iter().any(|kind| {
        mod_rs.contains(&format!("pub {kind} {name}")) || mod_rs.contains(&format!("pub(crate) {kind} {name}"))
    })
}

#[test]
fn every_file_of_db_names_only_the_tiers_below_it() {
    let found = db_violations(&src_dir());
    assert!(found.is_empty(), "names against db/mod.rs's tiers:\n{}", found.join("\n"));
}

#[test]
fn the_db_check_finds_a_subsystem_reaching_up_and_an_unlisted_file() {
    // A copy of the sources where a subsystem (the job accounting) names
    // the engine and an operation, a helper names a subsystem, an
    // operation names the facade's secondary instances, and a file is in
    // no tier.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("src");
    copy_tree(&src_dir(), &copy);
    let append = |file: &str, text: &str| {
        let path = copy.join("db").join(file);
        let mut body = std::fs::read_to_string(&path).unwrap();
        body.push_str(text);
        std::fs::write(&path, body).unwrap();
    };
    append("jobs.rs", "\n#[allow(unused_imports)]\nuse super::{\n    DbInner,\n    flush::TableTarget,\n};\n");
    append("sequence.rs", "\n#[allow(unused_imports)]\nuse super::memtables::Memtables;\n");
    append("write.rs", "\n#[allow(unused_imports)]\nuse super::secondary::CATCH_UP_ATTEMPTS;\n");
    std::fs::write(copy.join("db/stray.rs"), "use super::DbInner;\n").unwrap();
    let found = db_violations(&copy);
    let has = |file: &str, what: &str| found.iter().any(|v| v.starts_with(file) && v.contains(what));
    assert!(has("db/jobs.rs:", "names `engine`"), "{found:?}");
    assert!(has("db/jobs.rs:", "names `flush`"), "a group wrapped over lines is read: {found:?}");
    assert!(has("db/sequence.rs:", "names `memtables`"), "{found:?}");
    assert!(has("db/write.rs:", "names `secondary`"), "{found:?}");
    assert!(has("db/stray.rs", "not in db/mod.rs's tiers"), "{found:?}");
    assert_eq!(found.len(), 5, "{found:?}");
}

#[test]
fn db_tiers_are_read_from_the_list_in_db_mod_rs() {
    let mod_rs = "//! # Inside `db/`\n//!\n//! 1. Helpers: `a`, `b`,\n//!    `c`.\n//! 2. Subsystems, owning: `d`.\n//! # Next\n//! 3. x: `e`\n";
    assert_eq!(db_tiers(mod_rs), vec![vec!["a", "b", "c"], vec!["d"]]);
    let paths = super_paths_at("use super::{a::B, C};\nlet x = super::d::f();");
    let names: Vec<&str> = paths.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["a", "C", "d"]);
    let text = "use super::{a::B, C};\nlet x = super::d::f();";
    for (offset, name) in paths {
        assert!(text[offset..].starts_with(&name), "{offset} {name}");
    }
}
