// The sale's NFC-e in the window: what the app has of its notes after a start or a reload (the
// engine's events keep it after), and its DANFE, opened in a dialog and saved with the note.

import { applyNotas, current, errorText } from "./state.js";
import { showDanfe } from "./view.js";

/** The note's actions over the screen's `state`, calling the app's commands with `invoke` and
 * drawing the screen again with `draw`. */
export function notaDialog(state, invoke, draw) {
  /** The DANFE NFC-e of the sale on screen, made by the app from the note's own signed XML. */
  async function openDanfe() {
    const a = current(state);
    if (!a) return;
    try {
      const danfe = await invoke("danfe", { saleId: a.sale_id });
      if (!danfe) return;
      state.dialog = "danfe";
      showDanfe(danfe);
    } catch (err) {
      state.error = errorText(err);
      draw();
    }
  }

  /** What the app has of a sale's notes (after a start or a reload; events keep it after). */
  async function loadNotas(saleId) {
    if (!saleId) return;
    try {
      applyNotas(state, saleId, await invoke("notas", { saleId }));
    } catch {
      // The line comes with the next event about the note.
    }
  }

  return { openDanfe, loadNotas };
}
