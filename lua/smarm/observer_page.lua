--- smarm.observer_page: the observer's single page. Everything it shows it draws itself
-- (inline CSS, inline script, an SVG chart): it loads nothing from anywhere but the observer.
-- luacheck: no max line length
local M = {}

local PAGE = [=[<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>smarm observer</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#222}
header{background:#243447;color:#fff;padding:6px 12px;display:flex;gap:18px;align-items:baseline}
header h1{font-size:16px;margin:0}
main{display:grid;grid-template-columns:minmax(240px,1fr) 2.8fr;gap:10px;padding:10px}
section{background:#fff;border:1px solid #dde;border-radius:4px;padding:8px;overflow:auto}
h2{font-size:13px;margin:0 0 6px;color:#456}
#tree ul{list-style:none;margin:0;padding-left:14px}#tree>ul{padding-left:0}
.node{cursor:pointer;white-space:nowrap}.node:hover{background:#eef}
.badge{font-size:10px;border-radius:3px;padding:0 4px;margin-left:4px;color:#fff;background:#789}
.b-supervisor{background:#2a7}.b-worker{background:#37b}.b-observer{background:#b73}
.obs{color:#a60}.pid{color:#888;font-family:monospace}
table{border-collapse:collapse;width:100%;font-size:12px}th,td{padding:2px 5px;text-align:left;white-space:nowrap}
th{cursor:pointer;background:#eef;position:sticky;top:0}th.sorted{background:#dde}
tr:nth-child(even){background:#fafafd}tr.sel{background:#ffe9a8}tbody tr{cursor:pointer}
td.num{text-align:right;font-variant-numeric:tabular-nums}
#detail pre{margin:0;font-size:12px}#chart{width:100%;height:140px}
.legend span{margin-right:10px}input{font:inherit}
#right{display:flex;flex-direction:column;gap:10px;min-width:0}
</style></head>
<body data-refreshes="0">
<header><h1>smarm observer</h1><span id="summary"></span><span id="updated"></span></header>
<main>
<section id="treebox"><h2>Supervision tree</h2><div id="tree"></div></section>
<div id="right">
<section><h2>Scheduler utilisation, last minute</h2>
<svg id="chart" viewBox="0 0 600 140" preserveAspectRatio="none"></svg>
<div class="legend" id="legend"></div></section>
<section><h2>Actors</h2>
<input id="filter" placeholder="filter (name, id, state, file...)" size="40">
<label><input type="checkbox" id="hideobs"> hide the observer's actors</label>
<div style="max-height:420px;overflow:auto"><table id="actors"><thead><tr>
<th data-k="pid">pid</th><th data-k="label">name / id</th><th data-k="type">type</th>
<th data-k="state">state</th><th data-k="mailbox">mailbox</th><th data-k="memory">memory</th>
<th data-k="slices">slices</th><th data-k="messages_in">in</th><th data-k="messages_out">out</th>
<th data-k="hw">stack hw</th><th data-k="current">current</th></tr></thead>
<tbody></tbody></table></div></section>
<section id="detail"><h2>Actor</h2><div id="detailbody">Click an actor.</div>
<p><input id="token" placeholder="kill token (printed on stderr)" size="36">
<button id="kill" disabled>kill</button> <span id="killmsg"></span></p></section>
</div></main>
<script id="init" type="application/json">@INIT@</script>
<script>
"use strict";
const COLORS=["#37b","#2a7","#b73","#a3b","#b33","#3aa","#777","#9a3"];
let data=JSON.parse(document.getElementById("init").textContent);
let sortKey="memory",sortDesc=true,selected=null;
const $=id=>document.getElementById(id);
function esc(s){return String(s==null?"":s).replace(/[&<>"]/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]))}
function label(a){return a.name&&a.id&&a.name!==a.id?a.id+" ("+a.name+")":(a.id||a.name||"")}
function bytes(n){if(n==null)return"";if(n<1024)return n+" B";if(n<1048576)return(n/1024).toFixed(1)+" KiB";return(n/1048576).toFixed(1)+" MiB"}
function renderTree(){
  const out=[];
  const walk=list=>{out.push("<ul>");for(const n of list){
    const cls="node"+(n.observer?" obs":"")+(selected===n.pid?" sel":"");
    out.push('<li><span class="'+cls+'" data-pid="'+n.pid+'" data-id="'+esc(n.id||"")+'" data-type="'+esc(n.type)+'">'+
      esc(n.id||n.name||n.type)+(n.name&&n.id&&n.name!==n.id?" ("+esc(n.name)+")":"")+
      ' <span class="pid">'+esc(n.pid_text)+'</span>'+
      (n.type!=="actor"?'<span class="badge b-'+esc(n.type)+'">'+esc(n.type)+'</span>':"")+
      (n.observer?'<span class="badge b-observer">observer</span>':"")+
      ' <span class="pid">'+esc(n.state)+'</span></span>');
    if(n.children&&n.children.length)walk(n.children);out.push("</li>")}out.push("</ul>")};
  walk(data.tree||[]);$("tree").innerHTML=out.join("");
}
function renderTable(){
  const f=$("filter").value.toLowerCase(),hide=$("hideobs").checked;
  let rows=(data.actors||[]).map(a=>Object.assign({label:label(a),hw:a.stack?a.stack.high_water:0},a));
  rows=rows.filter(a=>!(hide&&a.observer)&&(!f||[a.pid_text,a.label,a.type,a.state,a.current].join(" ").toLowerCase().includes(f)));
  rows.sort((x,y)=>{let a=x[sortKey],b=y[sortKey];if(a==null)a="";if(b==null)b="";
    const c=(typeof a==="number"&&typeof b==="number")?a-b:String(a).localeCompare(String(b));return sortDesc?-c:c});
  const out=rows.map(a=>'<tr data-pid="'+a.pid+'"'+(a.pid===selected?' class="sel"':"")+'>'+
    '<td class="pid">'+esc(a.pid_text)+'</td><td class="'+(a.observer?"obs":"")+'">'+esc(a.label)+(a.observer?'<span class="badge b-observer">observer</span>':"")+'</td>'+
    '<td>'+esc(a.type)+'</td><td>'+esc(a.state)+'</td><td class="num">'+a.mailbox+'</td>'+
    '<td class="num">'+bytes(a.memory)+'</td><td class="num">'+a.slices+'</td><td class="num">'+a.messages_in+'</td>'+
    '<td class="num">'+a.messages_out+'</td><td class="num">'+bytes(a.hw)+'</td><td>'+esc(a.current)+'</td></tr>');
  document.querySelector("#actors tbody").innerHTML=out.join("");
  for(const th of document.querySelectorAll("#actors th"))th.className=th.dataset.k===sortKey?"sorted":"";
  const n=(data.actors||[]).length,o=(data.actors||[]).filter(a=>a.observer).length;
  $("summary").textContent=n+" actors ("+o+" the observer's)";
}
function renderChart(){
  const h=(data.schedulers&&data.schedulers.history)||[],W=600,H=140,N=60,out=[],leg=[];
  for(let y=0;y<=4;y++)out.push('<line x1="0" x2="'+W+'" y1="'+(y*H/4)+'" y2="'+(y*H/4)+'" stroke="#eee"/>'+
    '<text x="2" y="'+Math.max(10,y*H/4-2)+'" font-size="9" fill="#999">'+(100-y*25)+'%</text>');
  h.forEach((s,i)=>{const c=COLORS[i%COLORS.length];
    const pts=s.map((u,j)=>((N-s.length+j)*W/(N-1)).toFixed(1)+","+(H-u*H).toFixed(1)).join(" ");
    out.push('<polyline fill="none" stroke-width="2" stroke="'+c+'" points="'+pts+'"/>');
    const last=s.length?Math.round(s[s.length-1]*100):0;
    leg.push('<span style="color:'+c+'" data-sched="'+i+'">scheduler '+i+': '+last+'%</span>')});
  $("chart").innerHTML=out.join("");$("legend").innerHTML=leg.join("")||"collecting...";
}
async function showDetail(){
  if(selected==null){$("kill").disabled=true;return}
  $("kill").disabled=false;
  try{const r=await fetch("/api/actor?pid="+selected);
    $("detailbody").innerHTML=r.ok?"<pre>"+esc(JSON.stringify(await r.json(),null,1))+"</pre>":"gone";
  }catch(e){$("detailbody").textContent="unreachable"}
}
function render(){renderTree();renderTable();renderChart()}
async function refresh(){
  try{const [s,t,c]=await Promise.all(["/api/snapshot","/api/tree","/api/schedulers"].map(u=>fetch(u).then(r=>r.json())));
    data={actors:s.actors,tree:t.tree,schedulers:c};render();
    document.body.dataset.refreshes=String(Number(document.body.dataset.refreshes)+1);
    $("updated").textContent="updated "+new Date().toLocaleTimeString();
    if(selected!=null)showDetail();
  }catch(e){$("updated").textContent="observer unreachable"}
}
document.addEventListener("click",e=>{
  const th=e.target.closest("#actors th");
  if(th){if(sortKey===th.dataset.k)sortDesc=!sortDesc;else{sortKey=th.dataset.k;sortDesc=true}renderTable();return}
  const el=e.target.closest("[data-pid]");
  if(el&&!e.target.closest("#kill")){selected=Number(el.dataset.pid);render();showDetail()}
});
$("filter").addEventListener("input",renderTable);$("hideobs").addEventListener("change",renderTable);
$("token").value=localStorage.getItem("smarm-token")||"";
$("kill").addEventListener("click",async()=>{
  const tok=$("token").value.trim();localStorage.setItem("smarm-token",tok);
  const r=await fetch("/api/kill?pid="+selected,{method:"POST",headers:{"X-Smarm-Token":tok}});
  $("killmsg").textContent=r.ok?"killed":(await r.json()).error;refresh();
});
render();setInterval(refresh,1000);
</script></body></html>
]=]

--- The page with init (JSON of {actors, tree, schedulers}) inlined, so it shows the
-- state at once, before its first refresh.
function M.render(init)
   local i, j = PAGE:find("@INIT@", 1, true)
   return PAGE:sub(1, i - 1) .. init .. PAGE:sub(j + 1)
end

return M
