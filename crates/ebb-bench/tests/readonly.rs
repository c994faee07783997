//! `--readonly` (db_bench's): an existing database opened read-only, read
//! by the reading benchmarks; writing benchmarks, a fresh database and
//! transaction databases refused before anything runs.

use std::process::{Command, Output};

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn an_existing_database_is_read_read_only_and_writes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_flag = format!("--db={}", db.display());
    let o = ebb_bench(&["--benchmarks=fillseq", "--num=2000", "--progress=false", &db_flag]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let files_before: Vec<_> = std::fs::read_dir(&db).unwrap().map(|e| e.unwrap().file_name()).collect();

    let o = ebb_bench(&[
        "--benchmarks=readrandom,readseq",
        "--readonly",
        "--use_existing_db",
        "--num=2000",
        "--progress=false",
        &db_flag,
    ]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}\n{out}", text(&o.stderr));
    let line = out.lines().find(|l| l.starts_with("readrandom")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("(2000 of 2000 found)"), "{line}");
    // Nothing was written: the directory holds the same files.
    let mut after: Vec<_> = std::fs::read_dir(&db).unwrap().map(|e| e.unwrap().file_name()).collect();
    let mut before = files_before.clone();
    before.sort();
    after.sort();
    assert_eq!(before, after);

    for (args, words) in [
        (
            vec!["--benchmarks=readrandom,overwrite", "--readonly", "--use_existing_db"],
            "overwrite changes the database",
        ),
        (vec!["--benchmarks=compact", "--readonly", "--use_existing_db"], "compact changes the database"),
        (vec!["--benchmarks=readrandom", "--readonly"], "give --use_existing_db"),
        (vec!["--benchmarks=readrandom", "--readonly", "--use_existing_db", "--transaction_db"], "transactions write"),
    ] {
        let mut args = args.clone();
        args.push(&db_flag);
        let o = ebb_bench(&args);
        assert!(!o.status.success(), "{args:?} ran");
        let err = text(&o.stderr);
        assert!(err.contains(words), "{args:?}: {err}");
    }
}
