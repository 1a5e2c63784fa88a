/*
 * status_timeline.c - the timeline endpoint and strip chart of
 * status_timeline.h. The JSON gives each lane's points as [t_ms, state,
 * from] with t counted from the window's start, the state names of both
 * lane kinds, and the model, so the script needs nothing else. The chart is
 * drawn on a canvas by a script embedded in the page: one binary serves it,
 * with no file under the document root and no outside script.
 */
#include "status_timeline.h"

#include "http_path.h"

#include <cabrank/clock.h>
#include <cabrank/server.h>
#include <cabrank/timeline.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The window asked for in query ("window=<ms>", the last one given),
 * clamped; the default without one; -1 when not a number. */
static long parse_window(const char *q, size_t len)
{
    unsigned long v = 0;
    const char *s;
    size_t n;

    if (!http_query_param(q, len, "window", &s, &n))
        return STATUS_TIMELINE_WINDOW_MS;
    if (n == 0)
        return -1;
    for (size_t k = 0; k < n; k++) {
        if (s[k] < '0' || s[k] > '9')
            return -1;
        if (v <= STATUS_TIMELINE_WINDOW_MAX_MS) /* stays far from overflow */
            v = v * 10 + (unsigned long)(s[k] - '0');
    }
    if (v < STATUS_TIMELINE_WINDOW_MIN_MS)
        v = STATUS_TIMELINE_WINDOW_MIN_MS;
    return v > STATUS_TIMELINE_WINDOW_MAX_MS ? STATUS_TIMELINE_WINDOW_MAX_MS : (long)v;
}

static void write_names(FILE *f, const char *(*name)(int), int count)
{
    for (int i = 0; i < count; i++)
        fprintf(f, "%s\"%s\"", i > 0 ? "," : "", name(i));
}

static const char *role_name(int i)
{
    return cr_role_name((enum cr_role)i);
}

static const char *state_name(int i)
{
    return cr_worker_state_name((enum cr_worker_state)i);
}

int status_timeline_render(struct cr_server *srv, const char *query, size_t query_len, char **out,
                           size_t *len)
{
    long window = parse_window(query, query_len);
    struct cr_timeline_view *v;
    struct cr_server_stats st;
    uint64_t since;
    char *buf = NULL;
    size_t n = 0;
    FILE *f;
    int err;

    *out = NULL;
    *len = 0;
    if (window < 0)
        return -EINVAL;
    since = cr_clock_now_ns() - (uint64_t)window * CR_NSEC_PER_MSEC;
    err = cr_server_timeline(srv, since, &v);
    if (err < 0)
        return err;
    (void)cr_server_stats(srv, &st, NULL, 0);
    f = open_memstream(&buf, &n);
    if (f == NULL) {
        cr_timeline_view_free(v);
        return -ENOMEM;
    }
    fprintf(f, "{\"model\":\"%s\",\"window_ms\":%ld,\"now_ms\":%.3f,\"states\":{\"thread\":[",
            st.model != NULL ? st.model : "", window, (double)(v->now_ns - since) / 1e6);
    write_names(f, role_name, CR_ROLE_COUNT);
    fprintf(f, "],\"process\":[");
    write_names(f, state_name, CR_WORKER_STATE_COUNT);
    fprintf(f, "]},\"lanes\":[");
    for (unsigned i = 0; i < v->nlanes; i++) {
        const struct cr_timeline_lane *l = &v->lanes[i];

        /* Lane names are the library's ("lf 3", "pid 123"): no quoting needed. */
        fprintf(f, "%s\n{\"name\":\"%s\",\"kind\":\"%s\",\"points\":[", i > 0 ? "," : "", l->name,
                l->kind == CR_TIMELINE_PROCESS ? "process" : "thread");
        for (size_t k = 0; k < l->npoints; k++) {
            const struct cr_timeline_point *p = &l->points[k];
            double t = p->t_ns > since ? (double)(p->t_ns - since) / 1e6 : 0.0;

            fprintf(f, "%s[%.3f,%d,%d]", k > 0 ? "," : "", t, p->state, p->from);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
    cr_timeline_view_free(v);
    if (fclose(f) != 0 || buf == NULL) {
        free(buf);
        return -ENOMEM;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* Colours per state (the status tables' own), the papers' names for them in
 * the legend, a lane per row; the window is the zoom (buttons, or the wheel
 * over the chart); Pause freezes what is drawn. */
static const char section[] =
    "<div id=\"tlsec\"><h2 id=\"timeline\">Timeline</h2>\n"
    "<p class=tlbar><button id=tlpause>Pause</button> Window: "
    "<button data-w=100>0.1 s</button><button data-w=500>0.5 s</button>"
    "<button data-w=1000>1 s</button><button data-w=3000>3 s</button>"
    "<button data-w=10000>10 s</button> <span id=tlinfo></span></p>\n"
    "<canvas id=tl style=\"width:100%;height:120px;background:#fff;border:1px solid #ddd\">"
    "</canvas>\n<div id=tllegend class=tllegend></div>\n"
    "<style>.tlbar button{margin-right:.3em}.tllegend span{display:inline-block;margin:.2em "
    ".8em .2em 0}.tllegend i{display:inline-block;width:1em;height:1em;vertical-align:middle;"
    "margin-right:.3em;border:1px solid #999}</style></div>\n"
    "<script>\n"
    "(function(){\n"
    "var cv=document.getElementById('tl'),cx=cv.getContext('2d');\n"
    "var url=location.pathname.replace(/\\/$/,'')+'/timeline';\n"
    "var COL={thread:['#e0e0e0','#ffb300','#4fc3f7','#43a047','#ab47bc','#ef5350'],\n"
    " process:['#ffffff','#fff176','#4fc3f7','#ffb300','#43a047','#ffa726','#ef5350']};\n"
    "var SAY={thread:{idle:'idle: no work (a sync-layer worker waiting for a job)',\n"
    " leader:'leader: waits on the handle set for the next event',\n"
    " follower:'follower: waits to be promoted to leader',\n"
    " processing:'processing: runs an event handler',\n"
    " listener:'listener: the reactive layer (Half-Sync/Half-Reactive)',\n"
    " stopped:'stopped'},\n"
    " process:{starting:'starting',idle:'follower process: waits for the accept lock',\n"
    " listening:'leader process: holds the accept lock, waits for a connection',\n"
    " busy:'processing: serves a connection',stopping:'stopping',dead:'dead'}};\n"
    "var win=3000,paused=false,data=null,seen=0;\n"
    "function legend(d){var h='',k,s;for(k in SAY){var kinds=d.lanes.some(function(l){"
    "return l.kind===k;});if(!kinds)continue;for(s=0;s<d.states[k].length;s++){var n="
    "d.states[k][s];if(!SAY[k][n])continue;h+='<span><i style=\"background:'+COL[k][s]+"
    "'\"></i>'+SAY[k][n]+'</span>';}}h+='<span><b>&#8595;</b> leadership handed on "
    "(Leader/Followers promotion) or job handed off (Half-Sync/Half-Reactive)</span>';"
    "document.getElementById('tllegend').innerHTML=h;}\n"
    "function draw(){var d=data;if(!d)return;var dpr=window.devicePixelRatio||1,LH=20,"
    "TOP=4,L=120,W=cv.clientWidth,H=TOP+d.lanes.length*LH+22;cv.style.height=H+'px';"
    "cv.width=W*dpr;cv.height=H*dpr;cx.setTransform(dpr,0,0,dpr,0,0);cx.clearRect(0,0,W,H);"
    "var sx=(W-L-8)/d.window_ms;function X(t){return L+t*sx;}function Y(i){return TOP+i*LH;}"
    "cx.font='12px system-ui,sans-serif';cx.textBaseline='middle';"
    "d.lanes.forEach(function(l,i){cx.fillStyle='#222';cx.fillText(l.name,4,Y(i)+LH/2-1);"
    "var p=l.points;for(var k=0;k<p.length;k++){var x0=X(p[k][0]),x1=X(k+1<p.length?"
    "p[k+1][0]:d.now_ms);cx.fillStyle=COL[l.kind][p[k][1]]||'#999';"
    "cx.fillRect(x0,Y(i)+2,Math.max(x1-x0,1),LH-5);}});"
    "cx.strokeStyle='#222';cx.fillStyle='#222';cx.lineWidth=1;"
    "d.lanes.forEach(function(l,i){l.points.forEach(function(p){if(p[2]<0)return;"
    "var x=X(p[0]),y0=Y(p[2])+LH/2,y1=Y(i)+(p[2]<i?2:LH-3);cx.beginPath();cx.moveTo(x,y0);"
    "cx.lineTo(x,y1);cx.stroke();var s=p[2]<i?-1:1;cx.beginPath();cx.moveTo(x,y1);"
    "cx.lineTo(x-3,y1+4*s);cx.lineTo(x+3,y1+4*s);cx.fill();});});"
    "var y=TOP+d.lanes.length*LH+12,step=d.window_ms/5;cx.fillStyle='#555';"
    "for(var t=0;t<=d.window_ms+1e-9;t+=step){cx.fillRect(X(t),y-10,1,4);cx.fillText("
    "'-'+((d.window_ms-t)/1000).toFixed(d.window_ms<1000?2:1)+' s',X(t)-14,y);}"
    "document.getElementById('tlinfo').textContent='model '+d.model+', '+d.lanes.length+"
    "' lanes, last '+(d.window_ms/1000)+' s'+(paused?' (paused)':'');"
    "cv.dataset.lanes=d.lanes.length;cv.dataset.updates=++seen;}\n"
    "function poll(){if(paused)return;fetch(url+'?window='+win,{cache:'no-store'}).then("
    "function(r){if(r.status===404){document.getElementById('tlsec').style.display='none';"
    "paused=true;throw 0;}return r.json();}).then(function(d){if(!data)legend(d);data=d;draw();})"
    ".catch(function(){});}\n"
    "document.getElementById('tlpause').onclick=function(){paused=!paused;"
    "this.textContent=paused?'Resume':'Pause';draw();if(!paused)poll();};\n"
    "document.querySelectorAll('.tlbar button[data-w]').forEach(function(b){b.onclick="
    "function(){win=+b.dataset.w;poll();};});\n"
    "cv.addEventListener('wheel',function(e){e.preventDefault();win=Math.min(60000,"
    "Math.max(10,Math.round(win*(e.deltaY>0?1.25:0.8))));poll();},{passive:false});\n"
    "window.addEventListener('resize',draw);poll();setInterval(poll,500);\n"
    "})();\n</script>\n";

const char *status_timeline_section(void)
{
    return section;
}
