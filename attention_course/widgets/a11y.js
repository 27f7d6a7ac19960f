/* What both widgets need to follow the WAI-ARIA patterns they use. Imported by playground.js and
 * alignment.js; the Python side (front_end.py) inlines it into each widget's module for the page. */

export /** Arrow keys, Home and End move the choice of a radio group, and the focus with it (the WAI-ARIA radio group pattern). */
function radioKeys(group, radios, choose) {
  const moves = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
  group.addEventListener("keydown", (event) => {
    const all = radios();
    const at = all.indexOf(event.target);
    if (at < 0) return;
    let to;
    if (event.key in moves) to = (at + moves[event.key] + all.length) % all.length;
    else if (event.key === "Home") to = 0;
    else if (event.key === "End") to = all.length - 1;
    else return;
    event.preventDefault();
    choose(to);
    radios()[to].focus();
  });
}
