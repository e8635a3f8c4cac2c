/* tools/dot_html.c — `tfvm dot --html FILE.html`: one self-contained page
 * (no network, no files beside it) with the Graphviz SVG of the program,
 * a panel that shows the node clicked (opcode, the instruction with its
 * attributes, the static facts: dtype and shape, its source, its inputs and
 * consumers), and a list of the function and loop clusters, each of which
 * folds (its nodes and their edges hidden, its box kept). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfvm.h"
#include "tfvm_debug.h"
#include "tools/buf.h"
#include "tools/check.h"
#include "tools/dot_html.h"

static const char page_style[] =
    "body{margin:0;font:13px Helvetica,sans-serif;display:flex;height:100vh}"
    "#graph{flex:1;overflow:auto;border-right:1px solid #ccc}"
    "aside{width:380px;overflow:auto;padding:8px 12px;background:#f8fafc}"
    "h1{font-size:14px;margin:4px 0 8px}h2{font-size:13px;margin:12px 0 4px}"
    "dt{font-weight:bold;margin-top:6px}dd{margin:0 0 0 8px;font-family:monospace;white-space:pre-wrap}"
    "#graph svg{max-width:100%;height:auto}g.node{cursor:pointer}g.node.sel path,g.node.sel polygon{stroke:#dc2626;stroke-width:3}"
    "button{margin:2px 4px 2px 0;font-size:12px}.folded{opacity:.35}";

/* Finds the nodes and clusters Graphviz wrote (each <g> has a <title>: "i12",
 * "cluster_3", "i1->i2"), wires clicks, and folds clusters. */
static const char page_script[] =
    "const D=JSON.parse(document.getElementById('tfvm-data').textContent);\n"
    "const svg=document.querySelector('#graph svg'),panel=document.getElementById('node');\n"
    "const nodes={},clusters={},edges=[];\n"
    "svg.querySelectorAll('g.node').forEach(g=>{const id=g.querySelector('title').textContent;nodes[id]=g;"
    "g.addEventListener('click',()=>show(id));});\n"
    "svg.querySelectorAll('g.cluster').forEach(g=>{clusters[+g.querySelector('title').textContent.slice(8)]=g;});\n"
    "svg.querySelectorAll('g.edge').forEach(g=>{const t=g.querySelector('title').textContent.split('->');"
    "edges.push([t[0],t[1],g]);});\n"
    "function add(dl,k,v){const t=document.createElement('dt');t.textContent=k;const d=document.createElement('dd');"
    "d.textContent=v;dl.append(t,d);}\n"
    "function show(id){const n=D.nodes[id];if(!n)return;\n"
    "  Object.values(nodes).forEach(g=>g.classList.remove('sel'));nodes[id].classList.add('sel');\n"
    "  panel.textContent='';const h=document.createElement('h2');h.textContent=n.region+'.'+n.name;panel.append(h);\n"
    "  const dl=document.createElement('dl');add(dl,'opcode',n.op+' \\u2014 '+n.synopsis);add(dl,'instruction',n.text);\n"
    "  add(dl,'dtype and shape',n.facts);add(dl,'source',n.source||'-');add(dl,'region',n.kind+' '+n.region);\n"
    "  add(dl,'inputs',n.inputs.join('\\n')||'-');add(dl,'consumers',n.consumers.join('\\n')||'-');panel.append(dl);}\n"
    "const folded=new Set();\n"
    "function hidden(r){for(r=D.regions[r].parent;r>=0;r=D.regions[r].parent)if(folded.has(r))return true;return false;}\n"
    "function inFold(r){return folded.has(r)||hidden(r);}\n"
    "function refresh(){for(const id in nodes)nodes[id].style.display=inFold(D.nodes[id].r)?'none':'';\n"
    "  edges.forEach(([a,b,g])=>{g.style.display=nodes[a].style.display||nodes[b].style.display?'none':'';});\n"
    "  for(const r in clusters){clusters[r].style.display=hidden(+r)?'none':'';"
    "clusters[r].classList.toggle('folded',folded.has(+r));}}\n"
    "const list=document.getElementById('clusters');\n"
    "const labels=[];\n"
    "D.regions.forEach((g,r)=>{if(g.kind==='entry')return;const b=document.createElement('button');\n"
    "  const label=()=>{b.textContent=(folded.has(r)?'unfold ':'fold ')+g.kind+' '+g.name;};label();labels.push(label);\n"
    "  b.addEventListener('click',()=>{folded.has(r)?folded.delete(r):folded.add(r);label();refresh();});list.append(b);});\n"
    "// page.html#node=i12&fold=1,3 opens with node i12 shown and regions 1 and 3 folded\n"
    "new URLSearchParams(location.hash.slice(1)).forEach((v,k)=>{if(k==='node')show(v);\n"
    "  if(k==='fold'){v.split(',').forEach(r=>folded.add(+r));labels.forEach(l=>l());refresh();}});\n"
    "document.body.dataset.folded=[...folded].join(',');\n"
    "document.body.dataset.nodes=Object.keys(nodes).length;document.body.dataset.edges=edges.length;\n"
    "document.body.dataset.clusters=Object.keys(clusters).length;\n";

/* "main.x" for instruction i. */
static void put_label(FILE *f, const tfvm_program *p, uint32_t i, const char *suffix)
{
    tfvm_inst_info in;
    tfvm_program_inst(p, i, &in);
    char label[160], text[400];
    tfvm_inst_label(p, i, label, sizeof label);
    snprintf(text, sizeof text, "%s.%s%s", in.region, label, suffix);
    tb_json_str(f, text);
}

/* An edge: output `out` of instruction `src` feeds port `port` of `dst`. */
typedef struct link {
    uint32_t src, out, dst, port;
} link;

static int by_dst(const void *a, const void *b)
{
    const link *x = a, *y = b;
    return x->dst != y->dst ? (x->dst < y->dst ? -1 : 1) : x->port < y->port ? -1 : x->port > y->port;
}

/* Every edge, by source (*by_src) and by destination (*by_dst_out); false
 * when memory runs out. */
static bool all_links(const tfvm_program *p, link **by_src, link **by_dst_out, size_t *n_links)
{
    uint32_t n = (uint32_t)tfvm_program_inst_count(p);
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        tfvm_inst_info in;
        tfvm_program_inst(p, i, &in);
        total += in.n_edges;
    }
    link *a = calloc(total + 1, sizeof *a), *b = calloc(total + 1, sizeof *b);
    tfvm_edge_info *e = calloc(total + 1, sizeof *e);
    size_t m = 0;
    for (uint32_t i = 0; a && b && e && i < n; i++) {
        size_t k = tfvm_program_edges(p, i, e, total - m);
        k = k < total - m ? k : total - m;
        for (size_t j = 0; j < k; j++)
            a[m++] = (link){i, e[j].out, e[j].inst, e[j].port};
    }
    free(e);
    if (!a || !b) {
        free(a);
        free(b);
        return false;
    }
    memcpy(b, a, m * sizeof *a);
    qsort(b, m, sizeof *b, by_dst);
    *by_src = a;
    *by_dst_out = b;
    *n_links = m;
    return true;
}

/* The links of instruction i from *at on (a list sorted by source or by
 * destination), as labels: its inputs' producers or its consumers. */
static void put_links(FILE *f, const tfvm_program *p, uint32_t i, const link *l, size_t n, size_t *at, bool inputs)
{
    fputc('[', f);
    for (bool first = true; *at < n && (inputs ? l[*at].dst : l[*at].src) == i; ++*at, first = false) {
        const link *e = &l[*at];
        char how[64];
        snprintf(how, sizeof how, inputs ? " (its output %u, to port %u)" : " (output %u, to its port %u)", e->out,
                 e->port);
        fputs(first ? "" : ",", f);
        put_label(f, p, inputs ? e->src : e->dst, how);
    }
    fputc(']', f);
}

static void put_data(FILE *f, const tfvm_program *p, const char *name)
{
    uint32_t n = (uint32_t)tfvm_program_inst_count(p);
    char **facts = cli_facts(p);
    link *by_src = NULL, *by_dst_l = NULL;
    size_t n_links = 0, at_src = 0, at_dst = 0;
    if (!all_links(p, &by_src, &by_dst_l, &n_links))
        n_links = 0; /* out of memory: the page shows no links */
    fputs("{\"file\":", f);
    tb_json_str(f, name);
    fputs(",\"regions\":[", f);
    for (uint32_t r = 0; r < tfvm_program_region_count(p); r++) {
        tfvm_region_info g;
        tfvm_program_region(p, r, &g);
        fputs(r ? ",{\"name\":" : "{\"name\":", f);
        tb_json_str(f, g.name);
        fputs(",\"kind\":", f);
        tb_json_str(f, g.kind);
        fprintf(f, ",\"parent\":%d}", g.parent == UINT32_MAX ? -1 : (int)g.parent);
    }
    fputs("],\"nodes\":{", f);
    for (uint32_t i = 0; i < n; i++) {
        tfvm_inst_info in;
        tfvm_program_inst(p, i, &in);
        char label[160], text[1024], where[256];
        tfvm_inst_label(p, i, label, sizeof label);
        tfvm_inst_format(p, i, text, sizeof text);
        fprintf(f, "%s\"i%u\":{\"name\":", i ? ",\n" : "\n", i);
        tb_json_str(f, label);
        const char *fields[][2] = {{"op", in.op},         {"synopsis", in.synopsis}, {"text", text},
                                   {"region", in.region}, {"kind", in.region_kind},
                                   {"facts", facts ? facts[i] : "-"},
                                   {"source", tfvm_inst_where(p, i, where, sizeof where)}};
        for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
            fprintf(f, ",\"%s\":", fields[k][0]);
            tb_json_str(f, fields[k][1]);
        }
        fprintf(f, ",\"r\":%u,\"inputs\":", in.region_index);
        put_links(f, p, i, by_dst_l, n_links, &at_dst, true);
        fputs(",\"consumers\":", f);
        put_links(f, p, i, by_src, n_links, &at_src, false);
        fputc('}', f);
    }
    fputs("}}", f);
    cli_facts_free(facts, n);
    free(by_src);
    free(by_dst_l);
}

int cli_dot_html(const tfvm_program *p, const char *name, const char *svg, const char *path)
{
    const char *start = strstr(svg, "<svg");
    FILE *f = fopen(path, "w");
    if (!f || !start) {
        fprintf(stderr, "tfvm: %s: %s\n", path, !start ? "dot wrote no SVG" : "cannot create the file");
        if (f)
            fclose(f);
        return 1;
    }
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tfvm dot: ", f);
    for (const char *c = name; *c; c++) /* the name as HTML text */
        fputs(*c == '<' ? "&lt;" : *c == '&' ? "&amp;" : (char[]){*c, 0}, f);
    fprintf(f, "</title><style>%s</style></head>\n<body><div id=\"graph\">\n%s</div>\n", page_style, start);
    fputs("<aside><h1>click a node</h1><div id=\"node\"></div><h2>fold a function or loop</h2>"
          "<div id=\"clusters\"></div></aside>\n<script id=\"tfvm-data\" type=\"application/json\">",
          f);
    put_data(f, p, name);
    fprintf(f, "</script>\n<script>\n%s</script>\n</body></html>\n", page_script);
    if (ferror(f) | (fclose(f) != 0)) {
        fprintf(stderr, "tfvm: %s: cannot write the page\n", path);
        return 1;
    }
    return 0;
}
