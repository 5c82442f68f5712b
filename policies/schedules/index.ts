// The fixed schedules by name.

import { ScheduleBuilder } from './common';
import { gpipe } from './gpipe';
import { interleaved1F1B } from './interleaved';
import { oneFOneB } from './one-f-one-b';
import { zbH1 } from './zb-h1';

export { ScheduleBuilder, scheduleText } from './common';
export { gpipe, interleaved1F1B, oneFOneB, zbH1 };

export const SCHEDULES: readonly ScheduleBuilder[] = [gpipe, oneFOneB, interleaved1F1B, zbH1];
