//! One trial from start to end: servers, tills and the customer, the faults, the drain, the checks.

use super::*;

#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) seed: u64,
    pub(crate) store: String,
    pub(crate) kinds: BTreeSet<&'static str>,
    pub(crate) violations: [u32; INVARIANTS.len()],
    pub(crate) notes: Vec<String>,
    /// Pix charges at the provider, Pix received, and those received after their till closed.
    pub(crate) pix: [u32; 3],
    /// Divided sales, those paid in full, and those with a Pix paid after its removal.
    pub(crate) divided: [u32; 3],
    /// Card authorizations on the server, those captured, and those undone or lapsed.
    pub(crate) authorizations: [u32; 3],
    pub(crate) power: PowerCuts,
    /// Refunds paid back on the server.
    pub(crate) refunds: u32,
    /// Orders at the card machine, and those paid.
    pub(crate) machine: [u32; 2],
    /// NFC-e: authorized at SEFAZ, issued in contingência, numbers declared unused, set aside,
    /// authorized after all and cancelled by substitution, cancelled with their sale paid back.
    pub(crate) nfce: [u32; 5],
    /// Answers replayed by the checker, those of them the same byte for byte, and refunds' among
    /// them.
    pub(crate) answers: [u32; 3],
}

impl Outcome {
    /// A violation, or a note (a harness error among them): the trial fails.
    pub(crate) fn failed(&self) -> bool {
        self.violations.iter().sum::<u32>() > 0 || !self.notes.is_empty()
    }
}

pub(crate) async fn put_faults(client: &reqwest::Client, url: &str, faults: &Value) {
    let _ = client
        .put(format!("{url}/admin/faults"))
        .bearer_auth(ADMIN_TOKEN)
        .timeout(Duration::from_secs(2))
        .json(faults)
        .send()
        .await;
}

/// A PostgreSQL trial's own database, dropped when the trial ends.
struct TrialDatabase {
    pg_url: String,
    name: String,
}

impl TrialDatabase {
    fn create(pg_url: &str, name: String) -> Self {
        psql(pg_url, &format!("CREATE DATABASE {name}"));
        Self {
            pg_url: pg_url.to_string(),
            name,
        }
    }
}

impl Drop for TrialDatabase {
    fn drop(&mut self) {
        psql(
            &self.pg_url,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

pub(crate) async fn run_trial(
    plan: Plan,
    pg_url: String,
    root: PathBuf,
    psp: Arc<PixProcess>,
) -> Outcome {
    let mut out = Outcome {
        seed: plan.seed,
        store: plan
            .replicas
            .map_or("sqlite".into(), |n| format!("postgres x{n}")),
        ..Outcome::default()
    };
    let dir = tempfile::tempdir_in(&root).expect("a trial folder");
    // Per run, so PostgreSQL trials sharing one database never see an earlier run's rows.
    let run = *RUN_ID;
    let merchant = format!("m{}_{run}", plan.seed);
    let key = format!("sk_trial_{}_{run}", plan.seed);
    let log = dir.path().join("servers.log");
    // A SQLite server on power-cut disks: its database on one.
    let mut server_disk = None;
    if plan.power == Some(true) {
        match Disk::mount(dir.path(), "server") {
            Ok(disk) => server_disk = Some(disk),
            Err(e) => {
                out.notes.push(e);
                return out;
            }
        }
    }
    // The acquirer is another machine: its ledger on its own disk (in a power trial, one that
    // can be cut on its own), never cut with the server's.
    let mut acquirer_disk = None;
    if plan.power.is_some() {
        match Disk::mount(dir.path(), "acquirer") {
            Ok(disk) => acquirer_disk = Some(disk),
            Err(e) => {
                out.notes.push(e);
                return out;
            }
        }
    }
    let mut acquirer = AcquirerProcess::start_slow(
        acquirer_disk
            .as_ref()
            .map_or(dir.path(), |d| d.mountpoint.as_path()),
        plan.slow_gateway_ms,
    );
    let gateway_db = acquirer.ledger_file();
    // The state's SEFAZ, another machine: the tills' notes go there (its base beside the trial's).
    let sefaz_dir = dir.path().join("sefaz");
    let mut sefaz = plan.nfce.then(|| {
        std::fs::create_dir_all(&sefaz_dir).expect("the SEFAZ folder");
        SefazProcess::start(&sefaz_dir, 20)
    });
    // The card machine's provider, a terminal per till (an order no card pays expires in 3 s).
    let terminals: Vec<String> = (0..plan.tills.len())
        .map(|i| format!("PAGAR_SIM__POS-{i}"))
        .collect();
    let machine = plan
        .machine
        .then(|| Arc::new(MachineProcess::start(dir.path(), &terminals, 3)));
    // Dropped last, however the trial ends.
    let _own_database = plan
        .replicas
        .map(|_| TrialDatabase::create(&pg_url, pg_database(plan.seed)));
    let database = match plan.replicas {
        None => ApiDatabase::Sqlite(
            server_disk
                .as_ref()
                .map_or(dir.path(), |d| d.mountpoint.as_path())
                .join("api.db"),
        ),
        Some(_) => {
            psql(
                &pg_url,
                &format!("CREATE DATABASE {}", pg_database(plan.seed)),
            );
            ApiDatabase::Postgres(format!("{pg_url}/{}", pg_database(plan.seed)))
        }
    };
    let options = ApiOptions {
        database: database.clone(),
        api_key: key.clone(),
        merchant: merchant.clone(),
        extra: [
            "--lease-ms",
            "300",
            "--recovery-after-ms",
            "300",
            "--reaper-interval-secs",
            "1",
            "--pg-max-connections",
            "4",
        ]
        .map(String::from)
        .into_iter()
        .chain(acquirer.api_flags())
        .chain(machine.iter().flat_map(|m| m.api_flags(300)))
        .chain(
            plan.short_retention
                .then(|| ["--key-retention-secs".to_string(), "1".to_string()])
                .into_iter()
                .flatten(),
        )
        .chain(if plan.pix {
            let mut flags = psp.api_flags(300);
            flags.extend(["--pix-key".into(), pix_key(plan.seed)]);
            flags.extend(["--pix-expiry-secs".into(), PIX_EXPIRY_SECS.to_string()]);
            flags
        } else {
            Vec::new()
        })
        .collect(),
        log: Some(log.clone()),
        listen: None,
    };
    let mut servers: Vec<ApiProcess> = Vec::new();
    for _ in 0..plan.replicas.unwrap_or(1) {
        match start_server(&options) {
            Ok(s) => servers.push(s),
            Err(e) => {
                out.notes.push(format!("setup: {e}: {}", last_lines(&log)));
                return out;
            }
        }
    }
    let upstreams: Vec<_> = servers.iter().map(ApiProcess::addr).collect();
    let proxy = loop {
        if let Ok(p) = FaultProxy::try_balancing_on(next_port(), upstreams.clone()).await {
            break p;
        }
    };
    let url = proxy.url();
    let mut tills: Vec<Till> = Vec::new();
    for (i, p) in plan.tills.iter().enumerate() {
        let disk = match plan.power {
            Some(_) => match Disk::mount(dir.path(), &format!("till{i}")) {
                Ok(disk) => Some(disk),
                Err(e) => {
                    out.notes.push(e);
                    return out;
                }
            },
            None => None,
        };
        let folder = disk.as_ref().map_or(dir.path(), |d| d.mountpoint.as_path());
        let mut till = Till {
            outbox: folder.join(format!("till{i}.db")),
            child: None,
            log: dir.path().join(format!("till{i}.log")),
            disk,
            machine: plan.machine.then(|| terminals[i].clone()),
            sefaz: sefaz.as_ref().map(|s| (s.url().to_string(), i as u16 + 1)),
        };
        till.child = Some(start_till(&till, &url, &key, p, 10));
        tills.push(till);
    }
    // What tills held before a power cut of theirs: the answers they had received.
    let mut answers: Vec<Answer> = Vec::new();
    let mut cuts = 0u32;
    let http = reqwest::Client::new();
    let customer = plan.pix.then(|| {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(customer(
            psp.clone(),
            pix_key(plan.seed),
            plan.seed,
            stopped,
        ));
        (task, stop)
    });

    let at_machine = machine.clone().map(|m| {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(machine_customer(m, terminals.clone(), plan.seed, stopped));
        (task, stop)
    });
    if plan.short_retention {
        out.kinds.insert("server: keys kept 1 s");
    }
    if plan.tills.iter().any(|t| t.contains(":split-pix:")) {
        out.kinds.insert("sale: divided, a part by Pix");
    }
    // The fault window.
    let started = Instant::now();
    let mut killed: BTreeSet<usize> = BTreeSet::new();
    // A power cut the filesystem could not make (its daemon gone, the mount not back): the
    // trial ends as a harness error, never with a program started on the bare folder.
    let mut broken: Option<String> = None;
    for (at, action) in &plan.schedule {
        let wait = Duration::from_millis(*at).saturating_sub(started.elapsed());
        tokio::time::sleep(wait).await;
        out.kinds.insert(action.kind());
        match action {
            Action::ServerFaults(_, faults) => {
                for s in &servers {
                    put_faults(&http, &s.url(), faults).await;
                }
            }
            Action::Proxy(_, fault) => proxy.set(*fault).await,
            Action::KillTill(i) => {
                if let Some(child) = tills[*i].child.as_mut() {
                    kill(child);
                }
            }
            Action::KillServer(i) => {
                servers[*i].kill();
                killed.insert(*i);
            }
            Action::RestartServer(i) => {
                if killed.remove(i) {
                    revive(&mut servers[*i], &mut out.notes);
                }
            }
            Action::ClockJump(i, shift) => {
                if let Some(child) = tills[*i].child.as_mut() {
                    kill(child);
                }
                if Path::new(FAKETIME).exists() {
                    tills[*i].child = Some(start_till_at(&tills[*i], &url, &key, "", 10, *shift));
                } else {
                    out.notes
                        .push(format!("{FAKETIME} is missing: install faketime"));
                }
            }
            Action::PgTerminate => {
                let _ = Command::new("psql")
                    .arg(format!("{pg_url}/postgres"))
                    .args([
                        "-qtAc",
                        &format!(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '{}' AND application_name = 'payment-api'",
                            pg_database(plan.seed)
                        ),
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            Action::PowerCut(Cut::Server) => {
                for s in servers.iter_mut() {
                    s.kill();
                }
                if let Some(disk) = server_disk.as_mut() {
                    cuts += 1;
                    let seen = dir.path().join(format!("seen-{cuts}"));
                    let keys = |c: Option<rusqlite::Connection>| {
                        c.and_then(|c| {
                            c.query_row("SELECT count(*) FROM idempotency_keys", [], |r| {
                                r.get::<_, i64>(0)
                            })
                            .ok()
                        })
                        .unwrap_or(0)
                    };
                    let before = keys(disk.snapshot("api.db", &seen));
                    match disk.cut() {
                        Ok(r) => {
                            out.power.server += 1;
                            out.power.dropped(r);
                            let after = keys(disk.snapshot("api.db", &seen));
                            out.power.claims_lost += u32::try_from(before - after).unwrap_or(0);
                        }
                        Err(e) => {
                            broken = Some(e);
                            break;
                        }
                    }
                }
                // The loop below brings the server back, on the same address and files.
            }
            Action::Sefaz(_, modo) => {
                // Killed, it plays nothing (and comes back answering).
                if let Some(s) = sefaz.as_mut() {
                    if s.is_running() {
                        s.modo(modo.clone()).await;
                    }
                }
            }
            Action::KillSefaz => {
                if let Some(s) = sefaz.as_mut() {
                    s.kill();
                }
            }
            Action::RestartSefaz => {
                if let Some(s) = sefaz.as_mut() {
                    s.restart();
                }
            }
            Action::KillAcquirer => acquirer.kill(),
            Action::RestartAcquirer => acquirer.restart(),
            Action::PowerCut(Cut::Acquirer) => {
                acquirer.kill();
                if let Some(disk) = acquirer_disk.as_mut() {
                    cuts += 1;
                    match disk.cut() {
                        Ok(r) => {
                            out.power.acquirer += 1;
                            out.power.dropped(r);
                        }
                        Err(e) => {
                            broken = Some(e);
                            break;
                        }
                    }
                }
                acquirer.restart();
            }
            Action::PowerCut(Cut::Till(i)) => {
                let till = &mut tills[*i];
                if let Some(child) = till.child.as_mut() {
                    kill(child);
                }
                if let Some(disk) = till.disk.as_mut() {
                    cuts += 1;
                    let seen = dir.path().join(format!("seen-{cuts}"));
                    let name = format!("till{i}.db");
                    let before = disk
                        .snapshot(&name, &seen)
                        .map(|c| (answers_of(&c, *i), attempt_ids(&c, "state <> 'pendente'")));
                    match disk.cut() {
                        Ok(r) => {
                            out.power.tills += 1;
                            out.power.dropped(r);
                            if let Some((held, finals)) = before {
                                let pending = disk
                                    .snapshot(&name, &seen)
                                    .map(|c| attempt_ids(&c, "state = 'pendente'"))
                                    .unwrap_or_default();
                                out.power.back_to_pending +=
                                    finals.intersection(&pending).count() as u32;
                                answers.extend(held);
                            }
                        }
                        Err(e) => {
                            broken = Some(e);
                            break;
                        }
                    }
                }
                till.child = Some(start_till(till, &url, &key, "", 10));
            }
        }
        // A crash fault takes a server down by itself: bring it back, as a supervisor would.
        for (i, s) in servers.iter_mut().enumerate() {
            if !killed.contains(&i) && !s.is_running() {
                revive(s, &mut out.notes);
            }
        }
    }
    if let Some(e) = broken {
        for till in tills.iter_mut() {
            if let Some(child) = till.child.as_mut() {
                kill(child);
            }
        }
        if let Some((task, stop)) = customer {
            let _ = stop.send(true);
            task.abort();
        }
        if let Some((task, stop)) = at_machine {
            let _ = stop.send(true);
            task.abort();
        }
        out.notes.push(format!("setup: {e}"));
        return out;
    }
    tokio::time::sleep(Duration::from_millis(plan.window_ms).saturating_sub(started.elapsed()))
        .await;

    // Heal: faults off, the acquirer and every server up, every till restarted until its queue
    // drained.
    proxy.set(Fault::Pass).await;
    if !acquirer.is_running() {
        acquirer.restart();
    }
    if let Some(s) = sefaz.as_mut() {
        heal_sefaz(s, plan.sefaz_outlasts_ms, &mut out);
    }
    for s in servers.iter_mut() {
        if !s.is_running() {
            revive(s, &mut out.notes);
        }
    }
    for s in &servers {
        put_faults(&http, &s.url(), &json!({})).await;
    }
    // A QR nobody pays keeps its sale open until it expires (`PIX_EXPIRY_SECS` after it was
    // made, then the server's sweep and the till's next read): a Pix trial may take that long.
    let drain = 30 + if plan.pix { PIX_EXPIRY_SECS + 15 } else { 0 };
    let deadline = Instant::now() + Duration::from_secs(drain);
    loop {
        for s in servers.iter_mut() {
            if !s.is_running() {
                revive(s, &mut out.notes); // a crash fault that fired just before it was off
            }
        }
        let mut all_done = true;
        for till in tills.iter_mut() {
            let finished = match till.child.as_mut() {
                Some(child) => match child.try_wait() {
                    // Its own word too: a till that gave up waiting (`pending`) — on a note
                    // not yet issued, say, which the outbox alone cannot tell — runs again.
                    Ok(Some(status)) => {
                        status.success()
                            && drained(&till.outbox)
                            && last_lines(&till.log).ends_with("drained")
                    }
                    Ok(None) => {
                        all_done = false;
                        continue;
                    }
                    Err(_) => false,
                },
                None => false,
            };
            if !finished {
                all_done = false;
                if let Some(mut old) = till.child.take() {
                    kill(&mut old);
                }
                till.child = Some(start_till(till, &url, &key, "", 5));
            }
        }
        if all_done || Instant::now() > deadline {
            if !all_done {
                out.notes.push(format!("tills did not drain in {drain} s"));
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for till in tills.iter_mut() {
        if let Some(mut child) = till.child.take() {
            kill(&mut child);
        }
    }
    if let Some((task, stop)) = at_machine {
        let _ = stop.send(true);
        if let Ok(kinds) = task.await {
            out.kinds.extend(kinds);
        }
    }
    let mut pix_ledger = None;
    if let Some((task, stop)) = customer {
        // The customer is done; what it scheduled happens; every Pix it paid reaches a server
        // (by callback or poll); then each till asks once more about the Pix it closed.
        let _ = stop.send(true);
        let (kinds, done_by) = task.await.expect("the customer task");
        out.kinds.extend(kinds);
        tokio::time::sleep_until((done_by + Duration::from_millis(300)).into()).await;
        let ledger = psp.ledger(&pix_key(plan.seed)).await;
        if !pix_recorded(&database, &merchant, &ledger, &mut servers, &mut out.notes).await {
            out.notes
                .push("(g) a Pix paid at the provider was not recorded by a server in 15 s".into());
            out.violations[6] += 1;
        }
        ask_about_closed_pix(&mut tills, &url, &key, &mut out.notes).await;
        pix_ledger = Some(ledger);
    }
    // (j) and (k), while the servers still answer.
    for (t, till) in tills.iter().enumerate() {
        if let Ok(c) = rusqlite::Connection::open_with_flags(
            &till.outbox,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        ) {
            answers.extend(answers_of(&c, t));
            check_stored(&mut out, t, &till.log, &attempt_ids(&c, "1"));
        } else {
            check_stored(&mut out, t, &till.log, &BTreeSet::new());
        }
    }
    check_answers(&mut out, &http, &servers, &key, &answers).await;
    check_sales(
        &mut out,
        &http,
        &servers,
        &key,
        &tills,
        &database,
        &merchant,
        pix_ledger.as_ref(),
    )
    .await;
    for s in servers.iter_mut() {
        s.kill();
    }

    check(&mut out, &database, &gateway_db, &merchant, &tills, &log).await;
    if let Some(ledger) = pix_ledger {
        check_pix(&mut out, &database, &merchant, &tills, &ledger).await;
    }
    if let Some(machine) = &machine {
        check_machine(&mut out, &database, &merchant, machine).await;
    }
    if let Some(mut s) = sefaz.take() {
        s.kill();
        check_nfce(&mut out, &sefaz_dir.join("sefaz.db"), &tills).await;
    }
    if out.failed() && KEEP.get().is_some() {
        drop(tills); // unmounts the tills' disks (their files stay in `<name>-disk`)
        drop(server_disk);
        out.notes.push(format!("kept: {}", dir.keep().display()));
    }
    out
}
