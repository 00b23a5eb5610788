// Money, counts and times the way the screen writes them (pt-BR). No DOM, no state.

/** `1 venda`, `2 vendas`: a count with its noun in the right number. */
export function count(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

/** Centavos the Brazilian way: `R$ 1.234,56`. */
export function brl(centavos) {
  const neg = centavos < 0;
  const c = Math.abs(centavos);
  const reais = Math.floor(c / 100).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ".");
  return `${neg ? "-" : ""}R$ ${reais},${String(c % 100).padStart(2, "0")}`;
}

/** Centavos as the amount field shows them: `1.234,56`. */
export function brlInput(centavos) {
  return brl(centavos).replace("R$ ", "");
}

/** An amount typed the Brazilian way (`1.234,56`, `120`, `R$ 5,5`) in centavos, or null. The
 * app parses for real; this only lets the screen show the change as it is typed. */
export function parseBrl(text) {
  const t = String(text || "").replace(/^\s*R\$\s*/, "").trim();
  const m = /^(\d{1,3}(?:\.\d{3})+|\d+)(?:,(\d{1,2}))?$/.exec(t);
  if (!m) return null;
  return Number(m[1].replace(/\./g, "")) * 100 + Number((m[2] || "0").padEnd(2, "0"));
}

/** The line under "Valor recebido": the change, or what is still missing. */
export function trocoText(valorText, recebidoText) {
  const valor = parseBrl(valorText);
  const recebido = parseBrl(recebidoText);
  if (valor == null || recebido == null || valor <= 0) return "";
  return recebido >= valor ? `Troco ${brl(recebido - valor)}` : `Faltam ${brl(valor - recebido)}`;
}

/** Seconds from `now` until `ms`, never negative. */
export function secondsUntil(ms, now) {
  return Math.max(0, Math.ceil((ms - now) / 1000));
}

/** `mm:ss` of a number of seconds. */
export function clock(seconds) {
  const m = Math.floor(seconds / 60);
  return `${String(m).padStart(2, "0")}:${String(seconds % 60).padStart(2, "0")}`;
}

/** The time of day of `ms` in the store's time zone (not the machine's): `14:32:05`. */
export function storeTime(ms, offsetMinutes) {
  const d = new Date(ms + offsetMinutes * 60_000);
  const two = (n) => String(n).padStart(2, "0");
  return `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
}

export function capitalize(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
