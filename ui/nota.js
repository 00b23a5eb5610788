// The sale's NFC-e as the screen says it: which note is the sale's (the engine decides where each
// stands and by when a note in contingência must reach SEFAZ; this only words it). No DOM.

import { storeTime } from "./format.js";

/** Keeps the newest word on a note (`nota` with `enviar_ate`), by its key, under its sale. */
export function upsertNota(state, nota) {
  let notas = state.notas.get(nota.sale_id);
  if (!notas) {
    notas = new Map();
    state.notas.set(nota.sale_id, notas);
  }
  notas.set(nota.chave, nota);
}

/** The sale's notes (the `notas` command's answer) replace what the window had of them. */
export function applyNotas(state, saleId, notas) {
  state.notas.set(saleId, new Map(notas.map((n) => [n.chave, n])));
}

const LIVE = new Set(["pendente", "autorizada", "rejeitada", "numero_perdido"]);
const CANCELLING = new Set(["a_cancelar", "cancelada", "cancelamento_recusado"]);

/** The sale's note the receipt stands for (the newest one not set aside: a note being cancelled
 * because its sale was paid back is still the sale's), and the notes set aside that SEFAZ
 * authorized after all: being cancelled by substitution, cancelled, or whose cancellation SEFAZ
 * refused (a person's). */
export function notaOf(state, saleId) {
  const notas = [...(state.notas.get(saleId) || new Map()).values()]
    .sort((a, b) => a.emitida_em - b.emitida_em || a.numero - b.numero);
  const replaced = (n) => n.substituta != null;
  const live = notas.filter((n) => LIVE.has(n.estado) || (CANCELLING.has(n.estado) && !replaced(n)));
  const of = (estado) => notas.filter((n) => n.estado === estado && replaced(n));
  return {
    nota: live.length ? live[live.length - 1] : null,
    aCancelar: of("a_cancelar"),
    canceladas: of("cancelada"),
    recusadas: of("cancelamento_recusado"),
  };
}

/** What the receipt adds of the notes set aside that SEFAZ authorized after all. */
function replacedText({ aCancelar, canceladas, recusadas }) {
  const nums = (ns) => ns.map((n) => `nº ${n.numero}`).join(", ");
  return [
    recusadas.length ? ` · Atenção: ${nums(recusadas)} também foi autorizada e a SEFAZ recusou o cancelamento por substituição (${recusadas.map((n) => n.c_stat).join(", ")}): chame o responsável` : "",
    aCancelar.length ? ` · ${nums(aCancelar)} também foi autorizada: cancelamento por substituição enviando à SEFAZ` : "",
    canceladas.length ? ` · ${nums(canceladas)} cancelada por substituição` : "",
  ].join("");
}

/** `05/12 18:50` in the store's time zone. */
function dayTime(ms, offsetMinutes) {
  const d = new Date(ms + offsetMinutes * 60_000);
  const two = (n) => String(n).padStart(2, "0");
  return `${two(d.getUTCDate())}/${two(d.getUTCMonth() + 1)} ${storeTime(ms, offsetMinutes).slice(0, 5)}`;
}

/** `3 h 05 min`. */
function span(ms) {
  const minutes = Math.max(0, Math.floor(ms / 60_000));
  const h = Math.floor(minutes / 60);
  return h > 0 ? `${h} h ${String(minutes % 60).padStart(2, "0")} min` : `${minutes} min`;
}

/** What the screen says of the sale's note: `{kind, label, detail}` (`kind`: `enviando`,
 * `autorizada`, `contingencia`, `vencida`, `erro`), or null while the sale has none. */
export function notaText(state, saleId, now) {
  const notas = notaOf(state, saleId);
  const { nota } = notas;
  if (!nota) return null;
  const id = `NFC-e nº ${nota.numero} série ${nota.serie}`;
  const cancel = replacedText(notas);
  if (nota.estado === "cancelada") {
    return { kind: "autorizada", label: `${id} cancelada (venda devolvida)`, detail: `Protocolo do cancelamento ${nota.cancelamento}${cancel}` };
  }
  if (nota.estado === "a_cancelar") {
    return { kind: "enviando", label: `${id}: cancelamento enviando à SEFAZ (venda devolvida)`, detail: nota.motivo ? `Última tentativa: ${nota.motivo}` : "" };
  }
  if (nota.estado === "cancelamento_recusado") {
    return {
      kind: "erro",
      label: `${id}: a SEFAZ recusou o cancelamento (${nota.c_stat})`,
      detail: `${nota.motivo || ""} — a venda foi devolvida e a nota segue autorizada: chame o responsável${cancel}`,
    };
  }
  if (nota.estado === "autorizada") {
    const offline = nota.tp_emis === 9 ? " (emitida em contingência)" : "";
    return { kind: "autorizada", label: `${id} autorizada${offline}`, detail: `Protocolo ${nota.protocolo}${cancel}` };
  }
  if (nota.estado === "rejeitada" || nota.estado === "numero_perdido") {
    return {
      kind: "erro",
      label: `${id} rejeitada pela SEFAZ (${nota.c_stat})`,
      detail: `${nota.motivo || ""} — chame o responsável: a venda está sem nota válida${cancel}`,
    };
  }
  if (nota.tp_emis === 9) {
    const ate = nota.enviar_ate;
    const when = ate ? `enviar à SEFAZ até ${dayTime(ate, state.utcOffsetMinutes)}` : "a enviar à SEFAZ";
    if (ate && now > ate) {
      return { kind: "vencida", label: "NFC-e EMITIDA EM CONTINGÊNCIA — prazo de envio vencido", detail: `${id} · ${when} (vencido há ${span(now - ate)}): chame o responsável${cancel}` };
    }
    const left = ate ? ` (faltam ${span(ate - now)})` : "";
    return { kind: "contingencia", label: "NFC-e EMITIDA EM CONTINGÊNCIA", detail: `${id} · ${when}${left}${cancel}` };
  }
  return { kind: "enviando", label: `${id}: enviando à SEFAZ…`, detail: nota.motivo ? `Última tentativa: ${nota.motivo}` : "" };
}
