//! What a trial does, drawn from its seed: its store, tills, sales and faults, and its power cuts.

use super::*;

/// What a trial does, drawn from its seed.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) seed: u64,
    pub(crate) replicas: Option<usize>, // None: SQLite
    pub(crate) tills: Vec<String>,      // each till's plan string
    pub(crate) schedule: Vec<(u64, Action)>,
    pub(crate) window_ms: u64,
    /// How long `tok_lento` takes at the gateway: usually short, sometimes longer than the
    /// tills' request timeout (1.5 s), so executions are still running when reviews look.
    pub(crate) slow_gateway_ms: u64,
    /// The trial sells by Pix too (its sales with card `pix`), with a provider of its own.
    pub(crate) pix: bool,
    /// The trial runs on power-cut filesystems: `Some(true)` its server's SQLite files too.
    pub(crate) power: Option<bool>,
    /// The server keeps completed keys 1 s instead of 24 h: its reaper purges them while Pix
    /// charges wait and authorizations are open.
    pub(crate) short_retention: bool,
    /// The tills take some sales' cards at a card machine (one terminal each).
    pub(crate) machine: bool,
    /// The tills issue each paid sale's NFC-e to a SEFAZ simulator of the trial's own.
    pub(crate) nfce: bool,
    /// How long SEFAZ stays as the window left it once the other faults stop (its outage
    /// outlasts them: the notes of sales approved meanwhile go out in contingência).
    pub(crate) sefaz_outlasts_ms: u64,
}

/// What a power cut takes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// The SQLite server: its process and the unsynced writes of its database.
    Server,
    /// A till: its process and the unsynced writes of its outbox.
    Till(usize),
    /// The acquirer: its process and the unsynced writes of its ledger (another machine's disk).
    Acquirer,
}

#[derive(Debug, Clone)]
pub(crate) enum Action {
    ServerFaults(&'static str, Value),
    Proxy(&'static str, Fault),
    KillTill(usize),
    KillServer(usize),
    RestartServer(usize),
    PgTerminate,
    ClockJump(usize, i64),
    PowerCut(Cut),
    KillAcquirer,
    RestartAcquirer,
    /// The trial's SEFAZ plays a mode (`{"modo": …}`) from now on.
    Sefaz(&'static str, Value),
    KillSefaz,
    RestartSefaz,
}

impl Action {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Action::ServerFaults(k, _) | Action::Proxy(k, _) => k,
            Action::KillTill(_) => "kill -9 a till",
            Action::KillServer(_) => "kill -9 a server",
            Action::RestartServer(_) => "restart a server",
            Action::PgTerminate => "pg_terminate_backend",
            Action::ClockJump(..) => "a till's clock jumps",
            Action::Sefaz(k, _) => k,
            Action::KillSefaz => "kill -9 SEFAZ",
            Action::RestartSefaz => "restart SEFAZ",
            Action::PowerCut(Cut::Server) => "power cut: the server",
            Action::PowerCut(Cut::Till(_)) => "power cut: a till",
            Action::PowerCut(Cut::Acquirer) => "power cut: the acquirer",
            Action::KillAcquirer => "kill -9 the acquirer",
            Action::RestartAcquirer => "restart the acquirer",
        }
    }
}

pub(crate) fn draw(seed: u64, store: StoreChoice, power: f64) -> Plan {
    let mut plan = draw_faults(seed, store);
    // A third of the sales paid by an approving card are given back (their sale id says so and
    // the till refunds the payment once it is approved), drawn from a stream of their own.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x4553_544f_524e_4f53);
    for till in plan.tills.iter_mut() {
        *till = till
            .split(';')
            .map(|item| {
                let mut parts: Vec<String> = item.split(':').map(String::from).collect();
                if parts.get(2).map(String::as_str) == Some("tok_aprovado") && rng.gen_bool(0.33) {
                    parts[0].push_str("-estorno");
                }
                parts.join(":")
            })
            .collect::<Vec<_>>()
            .join(";");
    }
    // A Pix trial: some divided sales take their first part by Pix, and some servers keep their
    // keys a second only (from a stream of its own, like the refunds).
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5245_5445_4e43_4141);
    if plan.pix {
        plan.short_retention = rng.gen_bool(0.3);
        for till in plan.tills.iter_mut() {
            *till = till
                .split(';')
                .map(|item| {
                    let mut parts: Vec<String> = item.split(':').map(String::from).collect();
                    let divide = match parts.get(2).map(String::as_str) {
                        Some("split") => rng.gen_bool(0.5),
                        Some("pix") => rng.gen_bool(0.3),
                        _ => false,
                    };
                    if divide {
                        parts[2] = "split-pix".into();
                    }
                    parts.join(":")
                })
                .collect::<Vec<_>>()
                .join(";");
        }
    }
    // From a stream of its own: a seed's other draws are the same with power cuts or without.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x504f_5745_525f_4355);
    if rng.gen_bool(power) {
        let server = plan.replicas.is_none();
        plan.power = Some(server);
        for _ in 0..rng.gen_range(1..=3) {
            let at = rng.gen_range(0..plan.window_ms);
            let cut = if server && rng.gen_bool(0.4) {
                Cut::Server
            } else {
                Cut::Till(rng.gen_range(0..plan.tills.len()))
            };
            plan.schedule.push((at, Action::PowerCut(cut)));
        }
        plan.schedule.sort_by_key(|(at, _)| *at);
    }
    // Some trials' tills take cards at a card machine of their own too (a simulator process for
    // the trial, a terminal per till): some approving cards' sales go to the machine instead.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x4d41_5155_494e_494e);
    if rng.gen_bool(0.3) {
        plan.machine = true;
        for till in plan.tills.iter_mut() {
            *till = till
                .split(';')
                .map(|item| {
                    let mut parts: Vec<String> = item.split(':').map(String::from).collect();
                    if parts.get(2).map(String::as_str) == Some("tok_aprovado") && rng.gen_bool(0.5)
                    {
                        parts[2] = "maq".into();
                    }
                    parts.join(":")
                })
                .collect::<Vec<_>>()
                .join(";");
        }
    }
    // The acquirer, another machine, goes down too: killed and started again, or (in a power
    // trial) its disk cut. From a stream of its own, so a seed's other draws stay the same.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x4143_5155_4952_4552);
    if rng.gen_bool(0.25) {
        let at = rng.gen_range(0..plan.window_ms);
        let back = (at + rng.gen_range(50..400)).min(plan.window_ms);
        plan.schedule.push((at, Action::KillAcquirer));
        plan.schedule.push((back, Action::RestartAcquirer));
    }
    if plan.power.is_some() && rng.gen_bool(0.3) {
        let at = rng.gen_range(0..plan.window_ms);
        plan.schedule.push((at, Action::PowerCut(Cut::Acquirer)));
    }
    // Two in five trials issue NFC-e, their SEFAZ down, slow, losing answers or killed in the
    // window (a stream of its own).
    let mut rng = StdRng::seed_from_u64(seed ^ 0x4e46_4345_5345_4641);
    if rng.gen_bool(0.4) {
        plan.nfce = true;
        let modes: [(f64, &'static str, Value); 3] = [
            (0.5, "SEFAZ down", json!({"modo": "fora"})),
            (
                0.3,
                "SEFAZ loses answers",
                json!({"modo": "perde-resposta", "segundos": 2}),
            ),
            (0.2, "SEFAZ slow", json!({"modo": "lento", "segundos": 2})),
        ];
        for (p, kind, modo) in modes {
            if rng.gen_bool(p) {
                // While the tills sell (the first half of the window); in half of them it
                // outlasts the other faults (the notes of the sales approved meanwhile go out
                // in contingência, and are sent once it is back).
                let at = rng.gen_range(0..plan.window_ms / 2);
                plan.schedule.push((at, Action::Sefaz(kind, modo)));
                if rng.gen_bool(0.5) {
                    plan.sefaz_outlasts_ms = rng.gen_range(500..3_000);
                } else {
                    // A window is 300 ms or more: at 300 exactly, the range would be empty.
                    let back =
                        (at + rng.gen_range(300..plan.window_ms.max(301))).min(plan.window_ms);
                    plan.schedule
                        .push((back, Action::Sefaz("SEFAZ back", json!({"modo": "normal"}))));
                }
            }
        }
        if rng.gen_bool(0.25) {
            let at = rng.gen_range(0..plan.window_ms);
            let back = (at + rng.gen_range(50..400)).min(plan.window_ms);
            plan.schedule.push((at, Action::KillSefaz));
            plan.schedule.push((back, Action::RestartSefaz));
        }
    }
    plan.schedule.sort_by_key(|(at, _)| *at);
    plan
}

pub(crate) fn draw_faults(seed: u64, store: StoreChoice) -> Plan {
    let mut rng = StdRng::seed_from_u64(seed);
    let postgres = match store {
        StoreChoice::Sqlite => false,
        StoreChoice::Postgres => true,
        StoreChoice::Mixed => rng.gen_bool(0.3),
    };
    let replicas = postgres.then(|| rng.gen_range(1..=3));
    let window_ms = rng.gen_range(300..=1_200);
    let slow_gateway_ms = if rng.gen_bool(0.2) { 2_500 } else { 200 };
    let pix = rng.gen_bool(0.4);
    let tills = (0..rng.gen_range(1..=3))
        .map(|t| {
            let mut delays: Vec<u64> = (0..rng.gen_range(1..=4))
                .map(|_| rng.gen_range(0..window_ms))
                .collect();
            delays.sort_unstable();
            delays
                .into_iter()
                .enumerate()
                .map(|(s, delay)| {
                    let valor: i64 = match rng.gen_range(0..4) {
                        0 => rng.gen_range(99_900..=100_100), // around the per-payment cap
                        1 => rng.gen_range(1..=500),
                        _ => rng.gen_range(1_000..=99_000),
                    };
                    let card = match rng.gen_range(0..20) {
                        _ if pix && rng.gen_bool(0.4) => "pix",
                        _ if rng.gen_bool(0.15) => "split",
                        0..=11 => "tok_aprovado",
                        12..=14 => "tok_recusado",
                        15..=16 => "tok_saldo_insuficiente",
                        _ => "tok_lento",
                    };
                    let presses = if rng.gen_bool(0.3) { 2 } else { 1 };
                    format!("t{t}-v{s}:{valor}:{card}:{presses}:{delay}")
                })
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect::<Vec<_>>();
    let mut schedule = Vec::new();
    for n in 0..rng.gen_range(1..=5) {
        // Half the trials start with a fault already in place.
        let at = if n == 0 && rng.gen_bool(0.5) {
            0
        } else {
            rng.gen_range(0..window_ms)
        };
        let action = match rng.gen_range(0..18) {
            0 => Action::ServerFaults(
                "server: latency",
                json!({"latency_ms": rng.gen_range(50..400)}),
            ),
            1 => Action::ServerFaults(
                "server: drop after commit",
                json!({"drop_response_probability": rng.gen_range(0.3..1.0)}),
            ),
            2 => Action::ServerFaults(
                "server: 5xx",
                json!({"error_5xx_probability": rng.gen_range(0.3..1.0)}),
            ),
            3 => Action::ServerFaults(
                "server: 429",
                json!({"rate_limit_probability": rng.gen_range(0.3..1.0)}),
            ),
            4 => Action::ServerFaults(
                "server: reset before body",
                json!({"reset_before_body_probability": rng.gen_range(0.3..1.0)}),
            ),
            5 => Action::ServerFaults(
                "server: crash after charge",
                json!({"crash_after_charge_probability": rng.gen_range(0.3..1.0)}),
            ),
            6 => Action::Proxy("proxy: refuse", Fault::Refuse),
            7 => Action::Proxy("proxy: accept and close", Fault::AcceptClose),
            8 => Action::Proxy("proxy: swallow", Fault::Swallow),
            9 => Action::Proxy("proxy: cut after answer", Fault::CutAfterAnswer),
            10 => Action::Proxy("proxy: latency", Fault::Delay(rng.gen_range(20..300))),
            11 => Action::Proxy("proxy: starved", Fault::Starved),
            12 | 13 => Action::KillTill(rng.gen_range(0..tills.len())),
            14 => Action::KillServer(rng.gen_range(0..replicas.unwrap_or(1))),
            15 => Action::ClockJump(
                rng.gen_range(0..tills.len()),
                [-3_600, 3_600, 25 * 3_600][rng.gen_range(0..3)],
            ),
            16 => Action::Proxy(
                "proxy: middlebox 403 on the next POST",
                Fault::RejectNextPost(403),
            ),
            _ if postgres => Action::PgTerminate,
            _ => Action::Proxy("proxy: pass", Fault::Pass),
        };
        if let Action::KillServer(i) = action {
            let back = (at + rng.gen_range(50..400)).min(window_ms);
            schedule.push((back, Action::RestartServer(i)));
        }
        schedule.push((at, action));
    }
    schedule.sort_by_key(|(at, _)| *at);
    Plan {
        seed,
        replicas,
        tills,
        schedule,
        window_ms,
        slow_gateway_ms,
        pix,
        power: None,
        short_retention: false,
        machine: false,
        nfce: false,
        sefaz_outlasts_ms: 0,
    }
}
